// Package runner is the service that runs trials.
//
// # Overview
//
// A runner is stateless: any number of them, on any hosts, pull trial work
// (trial.scheduled events) from each running experiment's durable work
// consumer, one message per free slot and only when a slot is free, so no
// work waits in a buffer while its ack timer runs. For each attempt the
// runner publishes trial.started, runs the trainable — a registered Go
// function or any executable — and publishes its results as
// trial.reported events with Ray Tune's automatic fields, then
// trial.completed or trial.failed.
//
// # Inside an attempt
//
// An attempt (attempt.go) takes the work from delivery to settlement:
// heartbeats (heartbeat.go), the fenced trial.started (begin), the
// checkpoint to resume from (checkpoint.go), and one pure decision of how
// it ended (decide in outcome.go): settle publishes its events and returns
// how the bus settles the work (bus.Consume: nil acks, bus.Retry naks,
// bus.Terminate ends, bus.ErrLeave leaves it to the heartbeat timeout). The trainable
// runs in an Executor: funcExecutor for a registered Go function,
// commandExecutor for an executable speaking the trainable protocol; both
// pass one conformance suite (executor_test.go). It reports through the
// attempt's session (session.go), which builds each result with Ray's
// automatic fields (resultBuilder), checks the stop criteria
// (stopCriteria), stages checkpoints (stager) and artifacts
// (artifactSyncer), and sends the results to the log in order (reporter).
//
// # Python trials
//
// The runner carries the tunejet Python package of its own version
// (sdk/python, embedded in the binary). A Python command (python3 ..., or
// a script whose #! line names Python) whose interpreter cannot import a
// tunejet package of its own gets that copy, extracted once under the work
// directory, at the end of its PYTHONPATH (python.go); an installed one
// wins.
//
// # Heartbeats and acks
//
// While a trial runs the runner reports progress on its work message every
// third of the heartbeat timeout (the consumer's AckWait), so a runner that
// dies is noticed within one timeout and the work is redelivered. Success
// acks the message; a failure with attempts left naks it with a backoff; the
// last failure terminates it. The attempt number is the message's delivery
// count plus the scheduling's attempt base. Work the runner can never hold
// (scheduled after its gate last read the experiment's work, and needing
// more than the runner has idle) is not naked, which would spend a
// delivery: the runner publishes trial.returned and terminates the message,
// and the controller schedules the trial again at no cost (handBack).
//
// # Stops
//
// The runner checks the experiment's stop criteria on every report (Ray's
// >= rule), marks that result done and stops the trial, so no iteration runs
// past the criterion. It also stops a trial when the controller publishes
// trial.stop_requested. A Go trainable's context is cancelled; a command
// gets SIGTERM, and SIGKILL after the grace period.
package runner
