// Package syncer is the only service that writes an experiment's storage.
//
// # Overview
//
// The syncer follows every started experiment: it folds the experiment's
// events (internal/state) and writes Ray Tune's layout under
// <storage_path>/<name>/: .validate_storage_marker when the experiment
// starts, params.json when a trial is created, a result.json line and a
// progress.csv row for every accepted report, an error.txt entry for every
// counted failure, and experiment_state-<session>.json — the state snapshot
// with the stream sequence it reflects — every Period and when the
// experiment ends.
//
// # Exactly once
//
// The syncer replays the log from the start when it starts. A result line
// is written only if the trial's result.json holds fewer lines than the
// fold has accepted reports, and likewise for error.txt entries, so a
// restart never duplicates or loses a line.
package syncer
