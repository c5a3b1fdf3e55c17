// Package trainproto is the protocol between a runner and a command
// trainable: any executable (python3 train.py, a shell script, a binary)
// that a runner starts for one attempt of a trial.
//
// # Overview
//
// The runner starts the command with the trial directory as its working
// directory and describes the trial in environment variables (EnvConfig,
// EnvTrialID, EnvTrialName, EnvTrialDir, EnvAttempt, EnvExperiment,
// EnvSocket and, when the attempt resumes from a checkpoint,
// EnvCheckpointDir). Env builds that environment.
//
// The trainable connects to the Unix stream socket named by EnvSocket and
// sends one JSON object per line (a Request); the runner answers each with
// one JSON object per line (a Reply), strictly alternating on one connection:
//
//	-> {"op": "report", "metrics": {"loss": 0.25}, "checkpoint_dir": "/tmp/ckpt"}
//	<- {"ok": true, "stop": false}
//	-> {"op": "get_checkpoint"}
//	<- {"ok": true, "checkpoint_dir": null}
//	-> {"op": "bogus"}
//	<- {"ok": false, "error": "unknown op \"bogus\" (want \"report\" or \"get_checkpoint\")"}
//
// A report is answered only once the Handler has accepted it; with a
// checkpoint, after the directory's files have been staged, so the trainable
// may delete the directory right after. "stop": true asks the trainable to
// exit 0 promptly. The exit code decides the attempt: 0 completed, anything
// else failed. docs/trainable-protocol.md is the full description for
// trainable authors; sdk/python/tunejet is the Python client.
//
// # Server and client
//
// Listen creates the socket (in a short temporary directory when the wanted
// path would exceed the Unix socket path limit) and Serve answers requests on
// it by calling a Handler, one goroutine per connection, until its context is
// done. Dial returns a Client, the Go side of the protocol, used by the
// `tunejet report` shell helper; ParseKeyValues turns that helper's
// key=value arguments into metrics.
//
// # Numbers
//
// Metric values are arbitrary JSON values. The server decodes them with
// encoding/json defaults, as the events package does: numbers arrive in the
// Handler as float64, objects as map[string]any, arrays as []any. JSON has no
// NaN or Infinity; the Python SDK sends them as null.
//
// # Errors
//
// A request that cannot be decoded or is invalid is answered with
// {"ok": false, "error": "..."} naming the problem, and the connection stays
// usable. Only a line longer than MaxLineSize bytes ends the connection (after
// an error reply), because the stream can no longer be resynchronized
// cheaply. A Handler error is sent back the same way. On the client side, an
// ok:false reply is returned as an error wrapping ErrRejected.
package trainproto
