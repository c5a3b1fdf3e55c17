package runner

import (
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/storage"
)

// resultBuilder turns an attempt's reports into results: the trainable's
// metrics plus Ray Tune's automatic fields. It does no I/O and reads no
// clock: each report comes with its time.
type resultBuilder struct {
	TrialID, Hostname string
	PID               int
	// Start is when the attempt started: time_since_restore counts from it.
	Start time.Time
	// Iteration is the training_iteration of the last result: 0, or the
	// checkpoint's the attempt resumes from.
	Iteration int
	// TimeBefore is the time_total_s of the checkpoint the attempt resumes
	// from: time_total_s goes on from it, as in Ray.
	TimeBefore time.Duration

	sinceRestore int
	last         time.Time // the last report, or Start
}

// resumeFrom makes the results go on from checkpoint ref's: its
// training_iteration and time_total_s.
func (b *resultBuilder) resumeFrom(ref *events.CheckpointRef) {
	b.Iteration = ref.Iteration
	if v, ok := toFloat(ref.Metrics["time_total_s"]); ok && v > 0 {
		b.TimeBefore = time.Duration(v * float64(time.Second))
	}
}

// next returns the result of a report made at now. The automatic fields
// replace metrics of the same name; "done" is the trainable's when it is a
// bool, else false.
func (b *resultBuilder) next(metrics map[string]any, now time.Time) map[string]any {
	if b.last.IsZero() {
		b.last = b.Start
	}
	b.Iteration++
	b.sinceRestore++
	r := make(map[string]any, len(metrics)+12)
	for k, v := range metrics {
		r[k] = v
	}
	done, _ := metrics["done"].(bool)
	r["done"] = done
	r["training_iteration"] = b.Iteration
	r["iterations_since_restore"] = b.sinceRestore
	r["time_this_iter_s"] = now.Sub(b.last).Seconds()
	r["time_total_s"] = (b.TimeBefore + now.Sub(b.Start)).Seconds()
	r["time_since_restore"] = now.Sub(b.Start).Seconds()
	r["timestamp"] = now.Unix()
	r["date"] = now.Format("2006-01-02_15-04-05")
	r["trial_id"] = b.TrialID
	r["hostname"] = b.Hostname
	r["pid"] = b.PID
	b.last = now
	return r
}

// stopCriteria is the experiment's stop: {key: threshold}, where a key
// names a result field, nested ones as "a/b".
type stopCriteria map[string]float64

// met applies Ray's stop rule to a result: its "done" is true, or
// result[key] >= threshold for any criterion. missing lists the criteria
// the result lacks.
func (c stopCriteria) met(result map[string]any) (hit bool, missing []string) {
	hit = result["done"] == true
	if len(c) == 0 {
		return hit, nil
	}
	flat := storage.Flatten(result)
	for k, threshold := range c {
		v, ok := flat[k]
		if !ok {
			missing = append(missing, k)
			continue
		}
		if f, ok := toFloat(v); ok && f >= threshold {
			hit = true
		}
	}
	return hit, missing
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case int:
		return float64(x), true
	case int32:
		return float64(x), true
	case int64:
		return float64(x), true
	case uint:
		return float64(x), true
	case uint64:
		return float64(x), true
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}
