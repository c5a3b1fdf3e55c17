// Package bus is tunejet's NATS plumbing: connecting (Dial, or
// Embedded.Dial on an embedded nats-server), provisioning the event log and the per-experiment work
// consumers, publishing events, and replaying them.
//
// # The services' verbs
//
// Services speak to NATS only through the bus, in the domain's terms
// (internal/archtest holds them to it):
//
//   - Publish stores an event, optionally behind a Fence (stored only while
//     the newest message on a subject is the one the writer read);
//   - Watch, WatchSubjects, Replay and ReplayFrom follow the log in order;
//     LastEvent reads the newest event on a subject with its sequence;
//   - Consume hands a durable consumer's messages to a handler whose
//     returned error settles each one: nil acks, Retry naks with a delay,
//     Terminate ends it, any other error (or a panic) naks it with
//     FailureDelay; ErrLeave leaves it to be handed out again after the ack
//     wait. A runner consumes an experiment's work so, the consumer opened
//     (not created) and its slots shared across experiments. Follow streams
//     a durable consumer whose holder acks what it made durable (the
//     syncer), and follows again by itself when the consumer is lost;
//   - Subscribe delivers the events published on a subject from now on;
//     Request, Serve and Register are request/reply and NATS micro
//     registration (every service registers as tunejet-<name>);
//   - WorkQueue takes an experiment's work one delivery at a time;
//     AnswerLiveness and ProbeRunner are the runners' liveness;
//   - Checkpoints opens an experiment's checkpoint bucket (the bus is the
//     ckpt.Opener the restored-state loader reads through), the one JetStream
//     handle the bus hands out, to the checkpoint transport; the lease and
//     runner-registry verbs (PutRunnerInfo, LiveRunners, WatchRunners) cover
//     the KV buckets.
//
// A panic in a handler, a subscription, a request's handler or a Loops
// loop is recovered and logged with the event (type, subject, sequence)
// and the stack; the message is settled as a failure, and the next one is
// handled.
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
