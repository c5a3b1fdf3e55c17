package runner

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/tunejet/tunejet/internal/ckpt"
	telemetry "github.com/tunejet/tunejet/internal/metrics"
	"github.com/tunejet/tunejet/internal/restore"
	"github.com/tunejet/tunejet/internal/session"
)

// pid is this process's, read once: os.Getpid is a system call, and every
// result carries it.
var pid = os.Getpid()

// Report implements session.Session: it adds Ray's automatic fields,
// stages the checkpoint directory (if any) before it returns, checks the
// stop criteria and publishes the result.
func (a *attempt) Report(ctx context.Context, metrics map[string]any, checkpointDir string) (bool, error) {
	if a.stopped() != "" {
		return true, session.ErrStopped
	}
	a.mu.Lock()
	result := a.result(metrics, time.Now())
	hit := a.criteriaMet(result)
	if hit {
		result["done"] = true
	}
	a.mu.Unlock()
	// The trial's context may already be cancelled (a preempted trainable
	// taking its last checkpoint): its I/O must still complete.
	ctx = context.WithoutCancel(ctx)
	if checkpointDir != "" {
		// The log keeps the attempt's order: the results before this
		// one, then its checkpoint, then this result.
		if err := a.reports.flush(); err != nil {
			return false, err
		}
		name, err := a.stage(ctx, checkpointDir, result)
		if err != nil {
			return false, fmt.Errorf("report checkpoint: %w", err)
		}
		result["checkpoint_dir_name"] = name
	}
	onCkpt := checkpointDir != "" && a.work.Artifacts != nil && a.work.Artifacts.OnCheckpoint
	if err := a.syncArtifacts(ctx, onCkpt); err != nil {
		return false, err
	}
	if err := a.reports.add(result); err != nil {
		return false, err
	}
	telemetry.Reports.WithLabelValues(a.exp).Inc()
	if hit {
		a.stop("stop_criteria")
		return true, nil
	}
	return false, nil
}

func (a *attempt) iterationOf(result map[string]any) int {
	n, _ := result["training_iteration"].(int)
	return n
}

// Checkpoint implements session.Session: the local copy of the checkpoint
// this attempt resumes from, or "".
func (a *attempt) Checkpoint() string { return a.restored }

// Object implements session.Session: an object stored with tune.Put.
func (a *attempt) Object(ctx context.Context, name string) ([]byte, error) {
	obs, err := a.s.store(ctx, a.exp)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, ckpt.TransferTimeout)
	defer cancel()
	data, err := obs.GetBytes(ctx, restore.ObjectName(name))
	if err != nil {
		return nil, restore.ErrRefGone(name, err)
	}
	return data, nil
}

// Info implements session.Session.
func (a *attempt) Info() session.Info {
	return session.Info{Experiment: a.exp, TrialID: a.work.TrialID, TrialName: a.work.TrialName, TrialDir: a.dir, Attempt: a.num}
}

// result builds one result row: the trainable's metrics plus Ray's
// automatic fields. Caller holds a.mu.
func (a *attempt) result(metrics map[string]any, now time.Time) map[string]any {
	a.iteration++
	a.sinceRestore++
	r := make(map[string]any, len(metrics)+12)
	for k, v := range metrics {
		r[k] = v
	}
	done, _ := metrics["done"].(bool)
	r["done"] = done
	r["training_iteration"] = a.iteration
	r["iterations_since_restore"] = a.sinceRestore
	r["time_this_iter_s"] = now.Sub(a.last).Seconds()
	r["time_total_s"] = (a.timeBefore + now.Sub(a.start)).Seconds()
	r["time_since_restore"] = now.Sub(a.start).Seconds()
	r["timestamp"] = now.Unix()
	r["date"] = now.Format("2006-01-02_15-04-05")
	r["trial_id"] = a.work.TrialID
	r["hostname"] = a.s.hostname
	r["pid"] = pid
	a.last = now
	return r
}

// criteriaMet applies Ray's stop rule: result[key] >= threshold for any
// criterion. A key missing from the result is logged once.
func (a *attempt) criteriaMet(result map[string]any) bool {
	if len(a.work.Stop) == 0 {
		return false
	}
	flat := flatten(result)
	hit := false
	for k, threshold := range a.work.Stop {
		v, ok := flat[k]
		if !ok {
			if !a.warnedKeys[k] {
				a.warnedKeys[k] = true
				a.log.Warn().Str("criterion", k).Msg("stopping criterion not found in the result")
			}
			continue
		}
		if f, ok := toFloat(v); ok && f >= threshold {
			hit = true
		}
	}
	return hit
}

// flatten turns nested maps into "a/b" keys, as Ray does for stop criteria
// and CSV columns.
func flatten(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			if sub, ok := v.(map[string]any); ok {
				walk(prefix+k+"/", sub)
				continue
			}
			out[prefix+k] = v
		}
	}
	walk("", m)
	return out
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
