package events

// LeanReported exposes the lean trial.reported reader to the fuzz tests.
var LeanReported = leanReported
