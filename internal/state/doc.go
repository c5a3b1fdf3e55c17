// Package state is the experiment's state as a pure fold over its events.
//
// # Overview
//
// The JetStream log is the source of truth. Every service that needs to know
// where an experiment stands (the controller deciding, the syncer writing
// results, the CLI drawing its table, the restorer) folds the experiment's
// events with Fold, in stream order. Fold is deterministic and idempotent:
// an event delivered twice, or a stale event from a superseded attempt,
// changes nothing.
//
// # Fencing
//
// A trial's runner events (started, reported, checkpointed, failed,
// completed) carry an attempt number. trial.started with a higher attempt
// than the trial's current one begins a new attempt; every other runner
// event is applied only if it comes from the current attempt. A runner that
// was presumed dead and comes back cannot change a trial that moved on.
//
// # Snapshots
//
// Snapshot encodes the state as versioned, checksummed JSON that records the
// last stream sequence it reflects; Load reads it back, and folding the
// events after that sequence gives the same state as folding all of them.
//
// # Counts
//
// The controller asks after every batch of events how many trials are in
// each status (Counts), in flight (InFlight) and unfinished (Unfinished),
// and which wait for a work message (NeedingSchedule). The fold keeps
// those counts up to date as it changes trials, so asking costs the same
// whatever the number of trials; they are not part of the snapshot, and
// Load and a restored state count them afresh. Code that changes trials
// outside the fold calls Recount.
package state
