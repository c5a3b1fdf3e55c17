package runner

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/ckpt"
	telemetry "github.com/tunejet/tunejet/internal/metrics"
	"github.com/tunejet/tunejet/internal/restore"
	"github.com/tunejet/tunejet/internal/session"
)

// pid is this process's, read once: os.Getpid is a system call, and every
// result carries it.
var pid = os.Getpid()

// trialSession is an attempt's session: the trainable reports through it.
// Each report becomes a result with Ray's automatic fields
// (resultBuilder), checked against the stop criteria; its checkpoint, if
// any, is staged first (stager), the trial directory's artifacts along
// with it (artifactSyncer), and the result goes to the log in order
// (reporter).
type trialSession struct {
	attemptRef
	info      session.Info
	stopper   *stopper
	criteria  stopCriteria
	stager    *stager
	artifacts *artifactSyncer
	reports   *reporter
	restored  string      // the local copy of the checkpoint resumed from, or ""
	judged    *judgedMark // nil unless each report waits for its judgement

	mu      sync.Mutex
	results resultBuilder
	warned  map[string]bool // stop criteria found missing from a result
}

// newSession returns the session of an attempt that started at start.
func (a *attempt) newSession(start time.Time) *trialSession {
	return &trialSession{
		attemptRef: a.attemptRef,
		info: session.Info{
			Experiment: a.exp, TrialID: a.work.TrialID, TrialName: a.work.TrialName, TrialDir: a.dir, Attempt: a.num,
		},
		stopper:   a.stopper,
		criteria:  stopCriteria(a.work.Stop),
		stager:    &stager{attemptRef: a.attemptRef, scoreAttr: a.work.CheckpointScoreAttribute, dirName: a.work.DirName, route: a.route},
		artifacts: &artifactSyncer{attemptRef: a.attemptRef, dir: a.dir, policy: a.work.Artifacts, dirName: a.work.DirName, route: a.route},
		reports:   &reporter{attemptRef: a.attemptRef},
		judged:    a.judged,
		results:   resultBuilder{TrialID: a.work.TrialID, Hostname: a.s.hostname, PID: pid, Start: start},
		warned:    map[string]bool{},
	}
}

// resumeFrom makes the session go on from checkpoint ref, whose local copy
// is dir: training_iteration and time_total_s continue from the
// checkpoint's, and checkpoint numbering after it.
func (t *trialSession) resumeFrom(ref *events.CheckpointRef, dir string) {
	t.restored = dir
	t.results.resumeFrom(ref)
	t.stager.next = ref.Index + 1
}

// Paused reports whether the trial is told to stop because it is paused.
func (t *trialSession) Paused() bool { return t.stopper.Paused() }

// Report implements session.Session: it adds Ray's automatic fields,
// stages the checkpoint directory (if any) before it returns, checks the
// stop criteria and publishes the result.
func (t *trialSession) Report(ctx context.Context, metrics map[string]any, checkpointDir string) (bool, error) {
	if t.stopper.Reason() != "" {
		return true, session.ErrStopped
	}
	result, hit := t.result(metrics)
	trialCtx := ctx
	// The trial's context may already be cancelled (a preempted trainable
	// taking its last checkpoint): its I/O must still complete.
	ctx = context.WithoutCancel(ctx)
	if checkpointDir != "" {
		// The log keeps the attempt's order: the results before this
		// one, then its checkpoint, then this result.
		if err := t.reports.flush(); err != nil {
			return false, err
		}
		name, err := t.stager.stage(ctx, checkpointDir, result)
		if err != nil {
			return false, fmt.Errorf("report checkpoint: %w", err)
		}
		result["checkpoint_dir_name"] = name
	}
	if err := t.artifacts.sync(ctx, checkpointDir != "" && t.artifacts.onCheckpoint()); err != nil {
		return false, err
	}
	if err := t.reports.add(ctx, result); err != nil {
		return false, err
	}
	telemetry.Reports.WithLabelValues(t.exp).Inc()
	if hit {
		t.stopper.Stop("stop_criteria")
		return true, nil
	}
	return t.waitForJudgement(trialCtx, result), nil
}

// waitForJudgement holds a report, when the trial waits for decisions,
// until the controller has judged its result: it returns true when a
// decision stops or pauses the trial at it (its stop request ends the
// trial's context), as Ray's report() returns only once the driver has
// processed the result.
func (t *trialSession) waitForJudgement(ctx context.Context, result map[string]any) (stop bool) {
	it, _ := result["training_iteration"].(int)
	if t.judged == nil || it == 0 {
		return false
	}
	judged, late := t.judged.wait(ctx, it)
	if late {
		t.log.Warn().Int("training_iteration", it).Dur("waited", judgeWait).
			Msg("no judgement of the trial's result came; going on without waiting for it (logged once per attempt)")
	}
	return !judged
}

// result builds a report's result and checks it against the stop
// criteria: one that meets them is done. A criterion missing from the
// result is logged once.
func (t *trialSession) result(metrics map[string]any) (result map[string]any, hit bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	result = t.results.next(metrics, time.Now())
	hit, missing := t.criteria.met(result)
	for _, k := range missing {
		if !t.warned[k] {
			t.warned[k] = true
			t.log.Warn().Str("criterion", k).Msg("stopping criterion not found in the result")
		}
	}
	if hit {
		result["done"] = true
	}
	return result, hit
}

// Checkpoint implements session.Session: the local copy of the checkpoint
// this attempt resumes from, or "".
func (t *trialSession) Checkpoint() string { return t.restored }

// Info implements session.Session.
func (t *trialSession) Info() session.Info { return t.info }

// Object implements session.Session: an object stored with tune.Put.
func (t *trialSession) Object(ctx context.Context, name string) ([]byte, error) {
	obs, err := t.s.store(ctx, t.exp)
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
