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
	result := a.results.next(metrics, time.Now())
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

// criteriaMet applies the stop criteria to a result. A criterion missing
// from the result is logged once. Caller holds a.mu.
func (a *attempt) criteriaMet(result map[string]any) bool {
	hit, missing := stopCriteria(a.work.Stop).met(result)
	for _, k := range missing {
		if !a.warnedKeys[k] {
			a.warnedKeys[k] = true
			a.log.Warn().Str("criterion", k).Msg("stopping criterion not found in the result")
		}
	}
	return hit
}
