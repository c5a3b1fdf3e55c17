// Package bus is tunejet's NATS plumbing: connecting (or embedding a
// nats-server), provisioning the event log and the per-experiment work
// consumers, publishing events, and replaying them.
//
// # The log
//
// One JetStream stream, TUNEJET, with Limits retention holds every event of
// every experiment, on the subjects tunejet.*.<writer>.> for each writer.
// It is the source of truth. Work for runners is the trial.scheduled events
// of one experiment, read through that experiment's durable pull consumer
// (work_<experiment>) with explicit acks and MaxDeliver = max_failures + 1.
//
// # Dead letters
//
// A message on our subjects that does not decode is copied to the
// TUNEJET_DLQ stream (subject tunejet-dlq.<original subject>, with the error
// and the original sequence in headers), removed from the log, and logged.
// Only the controller does this; other readers skip such messages.
package bus
