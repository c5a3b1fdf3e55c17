// Package controller is the service that owns an experiment's decisions.
//
// # Overview
//
// The controller follows every submitted experiment. For each one it folds
// the experiment's events (internal/state) and runs a level-based reconcile:
// Decide reads the folded state and returns the next decisions — start the
// experiment, create and schedule trials within max_concurrent_trials, stop
// trials when the time budget runs out or fail_fast applies, complete the
// experiment — and the controller publishes each as an event before anything
// acts on it. It decides again only once its own events have come back
// through the log, so it never decides twice on a stale view.
//
// Decisions carry deterministic event ids, so a controller that restarts and
// decides the same thing again within JetStream's duplicate window is
// de-duplicated. A controller restart does not stop running trials: runners
// keep reporting to the log, and the new controller continues from it.
package controller
