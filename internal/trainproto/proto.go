package trainproto

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
)

// Environment variables the runner sets for a command trainable.
const (
	// EnvConfig is the trial config as a JSON object.
	EnvConfig = "TUNEJET_CONFIG"
	// EnvTrialID is the trial's id.
	EnvTrialID = "TUNEJET_TRIAL_ID"
	// EnvTrialName is the trial's display name.
	EnvTrialName = "TUNEJET_TRIAL_NAME"
	// EnvTrialDir is the trial directory, absolute; also the working directory.
	EnvTrialDir = "TUNEJET_TRIAL_DIR"
	// EnvAttempt is the attempt number: 1, 2, ...
	EnvAttempt = "TUNEJET_ATTEMPT"
	// EnvExperiment is the experiment's name.
	EnvExperiment = "TUNEJET_EXPERIMENT"
	// EnvSocket is the path of the runner's Unix stream socket.
	EnvSocket = "TUNEJET_SOCKET"
	// EnvCheckpointDir is set only when the attempt resumes from a checkpoint:
	// a local directory holding a copy of it.
	EnvCheckpointDir = "TUNEJET_CHECKPOINT_DIR"
	// EnvForkServer is "1" for a command started as a warm worker: it loads
	// the trainable, then forks one process per attempt on the runner's
	// requests (docs/trainable-protocol.md, "Warm workers").
	EnvForkServer = "TUNEJET_FORK_SERVER"
)

// Request ops.
const (
	OpReport        = "report"
	OpGetCheckpoint = "get_checkpoint"
	OpGetObject     = "get_object"
)

// MaxLineSize is the longest request or reply line, in bytes, not counting
// the newline. A longer request line ends the connection.
const MaxLineSize = 1 << 20

// ErrRejected is wrapped by the Client's errors for ok:false replies.
var ErrRejected = errors.New("rejected by the runner")

// errLineTooLong is readLine's error for a line over MaxLineSize.
var errLineTooLong error = lineTooLongError{MaxLineSize}

// lineTooLongError says a line is longer than the limit.
type lineTooLongError struct{ limit int }

func (e lineTooLongError) Error() string { return fmt.Sprintf("line exceeds %d bytes", e.limit) }

// Request is one request line from the trainable.
type Request struct {
	// Op is OpReport, OpGetCheckpoint or OpGetObject.
	Op string `json:"op"`
	// Metrics is the report's result; required for OpReport (it may be
	// empty, not null).
	Metrics map[string]any `json:"metrics,omitzero"`
	// CheckpointDir is the absolute path of a directory to checkpoint with
	// the report, or nil for none.
	CheckpointDir *string `json:"checkpoint_dir,omitempty"`
	// Name is the object OpGetObject reads: the name in an object
	// reference ({"object_ref": name}) of the trial's config.
	Name string `json:"name,omitempty"`
}

// Reply is one reply line from the runner. Each reply carries only the
// fields of its kind:
//
//	report:          {"ok": true, "stop": false}  (paused: {"ok": true, "stop": true, "pause": true})
//	get_checkpoint:  {"ok": true, "checkpoint_dir": "/path"}  (or null)
//	get_object:      {"ok": true, "path": "/path"}
//	any failure:     {"ok": false, "error": "message"}
type Reply struct {
	OK bool `json:"ok"`
	// Stop, in a report reply, asks the trainable to exit 0 now.
	Stop bool `json:"stop,omitempty"`
	// Pause, with Stop, says the trial is paused rather than stopped: it
	// resumes later from its latest checkpoint. The trainable exits all
	// the same.
	Pause bool `json:"pause,omitempty"`
	// CheckpointDir, in a get_checkpoint reply, is the directory holding the
	// checkpoint to resume from; "" (null on the wire) for none.
	CheckpointDir string `json:"checkpoint_dir,omitempty"`
	// Path, in a get_object reply, is a local file holding the object's
	// bytes, readable by the trainable until it exits.
	Path string `json:"path,omitempty"`
	// Error says why the request failed.
	Error string `json:"error,omitempty"`
}

// The exact wire forms the server writes; Reply decodes all of them.
type (
	reportReply struct {
		OK    bool `json:"ok"`
		Stop  bool `json:"stop"`
		Pause bool `json:"pause,omitempty"`
	}
	checkpointReply struct {
		OK            bool    `json:"ok"`
		CheckpointDir *string `json:"checkpoint_dir"`
	}
	objectReply struct {
		OK   bool   `json:"ok"`
		Path string `json:"path"`
	}
	errorReply struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	}
)

// Env is what the runner tells a command trainable through its environment.
type Env struct {
	// Config is the trial config, a JSON object.
	Config json.RawMessage
	// TrialID, TrialName and Experiment identify the trial.
	TrialID, TrialName, Experiment string
	// TrialDir is the trial directory: absolute, and the working directory.
	TrialDir string
	// Attempt is the attempt number, from 1.
	Attempt int
	// Socket is the path Listen returned.
	Socket string
	// CheckpointDir is the local copy of the checkpoint to resume from; ""
	// for a fresh start, in which case EnvCheckpointDir is not set.
	CheckpointDir string
}

// Environ returns the variables as "KEY=value" entries, to append to the
// runner's own environment for exec.Cmd.Env.
func (e Env) Environ() []string {
	env := []string{
		EnvConfig + "=" + string(e.Config),
		EnvTrialID + "=" + e.TrialID,
		EnvTrialName + "=" + e.TrialName,
		EnvTrialDir + "=" + e.TrialDir,
		EnvAttempt + "=" + strconv.Itoa(e.Attempt),
		EnvExperiment + "=" + e.Experiment,
		EnvSocket + "=" + e.Socket,
	}
	if e.CheckpointDir != "" {
		env = append(env, EnvCheckpointDir+"="+e.CheckpointDir)
	}
	return env
}

// decodeRequest parses and validates one request line.
func decodeRequest(line []byte) (Request, error) {
	var req Request
	if len(line) == 0 {
		return req, errors.New("empty request line: want a JSON object")
	}
	if err := json.Unmarshal(line, &req); err != nil {
		return req, describeDecodeError(err)
	}
	return req, req.validate()
}

func describeDecodeError(err error) error {
	var typeErr *json.UnmarshalTypeError
	if !errors.As(err, &typeErr) {
		return fmt.Errorf("invalid JSON: %w", err)
	}
	switch typeErr.Field {
	case "":
		return fmt.Errorf("request must be a JSON object, got %s", typeErr.Value)
	case "metrics":
		return fmt.Errorf(`field "metrics": must be a JSON object, got %s`, typeErr.Value)
	case "checkpoint_dir":
		return fmt.Errorf(`field "checkpoint_dir": must be a string or null, got %s`, typeErr.Value)
	default:
		return fmt.Errorf("field %q: must be a string, got %s", typeErr.Field, typeErr.Value)
	}
}

func (r Request) validate() error {
	switch r.Op {
	case OpReport:
		if r.Metrics == nil {
			return errors.New(`field "metrics": required, a JSON object`)
		}
		if r.CheckpointDir != nil {
			return checkDir(*r.CheckpointDir)
		}
		return nil
	case OpGetCheckpoint:
		return nil
	case OpGetObject:
		if r.Name == "" {
			return errors.New(`field "name": required, the object's name`)
		}
		return nil
	case "":
		return errors.New(`field "op": required ("report", "get_checkpoint" or "get_object")`)
	default:
		return fmt.Errorf(`unknown op %q (want "report", "get_checkpoint" or "get_object")`, r.Op)
	}
}

func checkDir(dir string) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf(`field "checkpoint_dir": must be an absolute path, got %q`, dir)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf(`field "checkpoint_dir": %w`, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf(`field "checkpoint_dir": %s is not a directory`, dir)
	}
	return nil
}

// readLine reads one line of at most MaxLineSize bytes and returns it
// without its "\n" (or "\r\n"). It returns errLineTooLong as soon as the line
// grows past the limit, leaving the rest of it unread. A last line without a
// newline is returned as is; io.EOF means there is no more input.
func readLine(r *bufio.Reader) ([]byte, error) { return readLineMax(r, MaxLineSize) }

// readLineMax is readLine with a limit of limit bytes.
func readLineMax(r *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		line = append(line, chunk...)
		n := len(line)
		if err == nil {
			n-- // the newline
		}
		if n > limit {
			return nil, lineTooLongError{limit}
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == nil, errors.Is(err, io.EOF) && n > 0:
			return bytes.TrimSuffix(line[:n], []byte("\r")), nil
		default:
			return nil, err
		}
	}
}
