// Package tboard writes a trial's TensorBoard event file as Ray Tune's
// TBXLoggerCallback does (python/ray/tune/logger/tensorboardx.py): the
// result's numbers as scalars tagged ray/tune/<key>, and the trial's
// hyperparameters for the HParams plugin when it ends. It computes bytes
// and does no I/O; the syncer writes them beside result.json.
//
// The file is a sequence of TFRecords (record.go), each a tensorflow
// Event (event.proto, summary.proto): the file's start, then one event
// per result holding all its scalars, so that a file can be cut back to
// its first n results (Cut), as result.json is, and written again from
// there exactly once.
package tboard

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tunejet/tunejet/internal/search"

	"github.com/tunejet/tunejet/internal/settings"
)

// FilePrefix begins every event file's name; TensorBoard reads the files
// whose names hold "tfevents".
const FilePrefix = "events.out.tfevents."

// FileName is the name Ray's writer gives a trial's event file:
// events.out.tfevents.<unix seconds>.<hostname>.
func FileName(created time.Time, host string) string {
	return FilePrefix + strconv.FormatInt(created.Unix(), 10) + "." + host
}

// tagPrefix begins each scalar's tag, as in Ray.
const tagPrefix = "ray/tune/"

// skipped are the result's fields Ray does not log as scalars ("not
// useful to log these").
var skipped = map[string]bool{"config": true, "pid": true, "timestamp": true, "time_total_s": true, "training_iteration": true}

// Scalar is one number of a result, under its TensorBoard tag.
type Scalar struct {
	Tag   string
	Value float64
}

// Scalars are the scalars Ray logs for a result, given flat, the result
// flattened with "/" (storage.Flatten): every number and bool (a bool is
// an int in Python) but NaN and the skipped fields, sorted by tag.
// Strings, nulls and lists are not scalars (Ray writes lists as
// histograms, which this package does not).
func Scalars(flat map[string]any) []Scalar {
	out := make([]Scalar, 0, len(flat))
	for k, v := range flat {
		top, _, _ := strings.Cut(k, "/")
		if skipped[k] || top == "config" {
			continue
		}
		f, ok := number(v)
		if !ok || math.IsNaN(f) {
			continue
		}
		out = append(out, Scalar{Tag: tagPrefix + k, Value: f})
	}
	slices.SortFunc(out, func(a, b Scalar) int { return strings.Compare(a.Tag, b.Tag) })
	return out
}

// Step is the step Ray logs a result at: its timesteps_total when that is
// set and not 0, else its training_iteration.
func Step(result map[string]any) int64 {
	if f, _, ok := settings.Number(result["timesteps_total"]); ok && f != 0 {
		return int64(f)
	}
	f, _, _ := settings.Number(result["training_iteration"])
	return int64(f)
}

// WallTime is when a result was reported, in seconds since the epoch: its
// timestamp field, else at.
func WallTime(result map[string]any, at time.Time) float64 {
	if f, _, ok := settings.Number(result["timestamp"]); ok {
		return f
	}
	return float64(at.UnixNano()) / 1e9
}

// EvaluatedParams are Ray's trial.evaluated_params: the values in config
// of the space's domains (the sampled ones, not its constants), keyed by
// their path joined with "/".
func EvaluatedParams(space *search.Space, config map[string]any) map[string]any {
	out := map[string]any{}
	for _, d := range space.Domains() {
		if v, ok := d.Lookup(config); ok {
			out[strings.Join(d.Path, "/")] = v
		}
	}
	return out
}

// number reads a reported number, or a bool as 1 or 0.
func number(v any) (float64, bool) {
	if b, ok := v.(bool); ok {
		if b {
			return 1, true
		}
		return 0, true
	}
	f, _, ok := settings.Number(v)
	return f, ok
}
