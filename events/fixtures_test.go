package events_test

import (
	"fmt"
	"time"

	"github.com/tunejet/tunejet/events"
)

// The experiment and trial that every fixture is about.
const (
	fxExperiment = "mnist_tune"
	fxTrial      = "3f9a2_00001"
	fxDigest     = "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	fxDirName    = "train_mnist_3f9a2_00001_1_lr=0.0100,momentum=0.9000_2026-11-29_12-00-00"
)

// fxTime is the time of the first fixture; each next one is a second later.
var fxTime = time.Date(2026, 11, 29, 12, 0, 0, 123456789, time.UTC)

// fixture is one realistic event per type, with a fixed id and time. Numbers
// inside map[string]any are float64, as encoding/json decodes them, so a
// decoded event compares equal to its fixture.
func fixture(typ string) *events.Event {
	for i, f := range fixtures() {
		if f.Data.Type() == typ {
			f.ID = fmt.Sprintf("6f1c0e4b9a2d4e7f8c3b5a1d2e4f%04x", i)
			f.Time = fxTime.Add(time.Duration(i) * time.Second)
			f.Experiment = fxExperiment
			return f
		}
	}
	return nil
}

func fixtures() []*events.Event {
	const (
		client     = "tunejet/client/laptop-4821"
		controller = "tunejet/controller/ctl-0"
		runner     = "tunejet/runner/gpu-host-2"
		syncer     = "tunejet/syncer/sync-0"
		restorer   = "tunejet/restorer/rst-0"
	)
	ckpt := events.CheckpointRef{
		Name: "checkpoint_000002", Index: 2, Object: "3f9a2_00001/checkpoint_000002",
		Size: 48213, Digest: fxDigest, Iteration: 6,
		Metrics: map[string]any{"mean_accuracy": 0.9688, "training_iteration": 6.0},
	}
	return []*events.Event{
		{Writer: events.WriterClient, Source: client, Data: &events.ExperimentSubmitted{Spec: fxSpec()}},
		{Writer: events.WriterController, Source: controller, Data: &events.ExperimentStarted{
			Run: 1, Session: "2026-11-29_12-00-00", Seed: 1234, TrialIDPrefix: "3f9a2",
			NumTrials: 4, StoragePath: "s3://ml-results/tunejet?region=eu-west-1",
		}},
		{Writer: events.WriterClient, Source: client, Data: &events.ExperimentStopRequested{Reason: "stopped by user"}},
		{Writer: events.WriterController, Source: controller, Data: &events.ExperimentInterrupted{Reason: "SIGINT"}},
		{Writer: events.WriterController, Source: controller, Data: &events.ExperimentCompleted{Reason: "finished"}},
		{Writer: events.WriterRestorer, Source: restorer, Data: &events.ExperimentRestored{
			Resume: events.ResumeConfig{Finished: "skip", Unfinished: "resume", Errored: "restart"},
			Source: "snapshot", Snapshot: "experiment_state-2026-11-29_12-00-00.json",
			Object: "restored/run-2", Digest: fxDigest,
			Mirror: &events.Mirror{
				UploadDir: "hdfs://namenode/tune",
				Syncer:    &events.CommandSyncer{SyncUp: "hdfs dfs -put -f {source} {target}", SyncDown: "hdfs dfs -get {source} {target}"},
				Exclude:   []string{"*/checkpoint_*"},
			},
		}},
		{Writer: events.WriterController, Source: controller, Data: &events.TrialCreated{
			TrialID: fxTrial, Index: 1, TrialName: "train_mnist_" + fxTrial,
			ExperimentTag: "1_lr=0.0100,momentum=0.9000", DirName: fxDirName, Config: fxConfig(),
		}},
		{Writer: events.WriterController, Source: controller, Data: &events.TrialScheduled{
			TrialID: fxTrial, TrialName: "train_mnist_" + fxTrial, DirName: fxDirName, Config: fxConfig(),
			Trainable:   events.Trainable{Name: "train_mnist", Command: []string{"python3", "train.py", "--epochs", "10"}, Dir: "/home/ada/mnist", Resources: fxResources()},
			Stop:        map[string]float64{"training_iteration": 10, "mean_accuracy": 0.98},
			AttemptBase: 1, MaxFailures: 3, HeartbeatTimeoutS: 30, Checkpoint: &ckpt,
			CheckpointScoreAttribute: "mean_accuracy", Artifacts: &events.ArtifactSync{PeriodS: 300, OnCheckpoint: true},
			Resources: events.Resources{"cpu": 2, "gpu": 0.5, "memory": 2e9, "tpu_slice": 1},
		}},
		{Writer: events.WriterRunner, Source: runner, Data: &events.TrialStarted{
			TrialID: fxTrial, Attempt: 2, Runner: "runner-gpu-host-2-7f3a", Hostname: "gpu-host-2",
			PID: 48213, RestoredFrom: "checkpoint_000002", WorkSeq: 41,
		}},
		{Writer: events.WriterRunner, Source: runner, Data: &events.TrialReported{
			TrialID: fxTrial, Attempt: 2, Result: map[string]any{
				"mean_accuracy": 0.9713, "loss": 0.0912, "training_iteration": 7.0,
				"time_this_iter_s": 3.52, "time_total_s": 24.9, "timestamp": 1.796040007e9,
				"iterations_since_restore": 1.0, "done": false,
			},
		}},
		{Writer: events.WriterRunner, Source: runner, Data: &events.TrialCheckpointed{TrialID: fxTrial, Attempt: 2, Checkpoint: ckpt}},
		{Writer: events.WriterRunner, Source: runner, Data: &events.TrialFailed{
			TrialID: fxTrial, Attempt: 2, Cause: events.CauseError, ErrorType: "ExitError",
			Error:   "Traceback (most recent call last):\n  File \"train.py\", line 42, in <module>\nRuntimeError: CUDA out of memory\nexit status 1",
			Counted: true,
		}},
		{Writer: events.WriterController, Source: controller, Data: &events.TrialStopRequested{TrialID: fxTrial, Reason: "stop_criteria"}},
		{Writer: events.WriterRunner, Source: runner, Data: &events.TrialCompleted{
			TrialID: fxTrial, Attempt: 3, Status: events.StatusTerminated, Reason: "stop_criteria",
		}},
		{Writer: events.WriterRunner, Source: runner, Data: &events.TrialArtifacts{
			TrialID: fxTrial, Attempt: 2, Object: fxTrial + "/artifacts_000004", Files: 3, Size: 90211, Digest: fxDigest,
		}},
		{Writer: events.WriterSyncer, Source: syncer, Data: &events.CheckpointPersisted{
			TrialID: fxTrial, Name: "checkpoint_000002",
			Path: "s3://ml-results/tunejet/mnist_tune/" + fxDirName + "/checkpoint_000002", Size: 48213, Digest: fxDigest,
		}},
		{Writer: events.WriterSyncer, Source: syncer, Data: &events.CheckpointDeleted{TrialID: fxTrial, Name: "checkpoint_000000", Reason: "num_to_keep"}},
		{Writer: events.WriterSyncer, Source: syncer, Data: &events.SyncCompleted{
			Seq: 1289, Snapshot: "experiment_state-2026-11-29_12-00-00.json", Files: 14, Bytes: 1093422, DurationS: 1.25,
		}},
		{Writer: events.WriterSyncer, Source: syncer, Data: &events.SyncFailed{
			Operation: "upload mnist_tune/" + fxDirName + "/result.json",
			Error:     "s3: PutObject: RequestTimeout: Your socket connection to the server was not read from or written to within the timeout period",
			Attempt:   2,
		}},
		{Writer: events.WriterController, Source: controller, Data: &events.TrialDecided{
			TrialID: fxTrial, Ordinal: 7, By: events.DecidedByScheduler, Action: "stop",
			Reason: "stopped at rung 4 (training_iteration 4): 0.41 < cutoff 0.53, the 75th percentile of 3 other trials' values",
			Detail: map[string]any{"trial": fxTrial, "action": "stop", "rung": map[string]any{
				"bracket": 0.0, "rung": 1.0, "milestone": 4.0, "time": 4.0, "reward": 0.41, "percentile": 75.0,
				"cutoff": 0.53, "count": 3.0, "values": []any{0.2, 0.5, 0.54},
			}},
			ResultSeq: 1277,
		}},
		{Writer: events.WriterRunner, Source: runner, Data: &events.TrialPaused{
			TrialID: fxTrial, Attempt: 3, Reason: "paused at milestone 9 (training_iteration): waiting for 2 trials of band 1 bracket 0 to reach it",
		}},
		{Writer: events.WriterRunner, Source: "tunejet/runner/cpu-host-1", Data: &events.TrialReturned{
			TrialID: fxTrial, Attempt: 4, WorkSeq: 1290, Runner: "runner-cpu-host-1-2c9e", Reason: "needs gpu=0.5; runner runner-cpu-host-1-2c9e has gpu=0",
		}},
		{Writer: events.WriterController, Source: controller, Data: &events.DriverAnswered{
			DriverQuestion: events.DriverQuestion{
				Key: "stop/" + fxTrial + "/5", Method: events.DriverStop, Through: 1301, TrialID: fxTrial,
				Result: map[string]any{"loss": 0.41, "training_iteration": 5.0},
			},
			ResultSeq: 1299, Answer: events.DriverAnswer{Stop: true}, By: "PlateauStopper",
		}},
	}
}

func fxConfig() map[string]any {
	return map[string]any{"lr": 0.01, "momentum": 0.9, "model": map[string]any{"layers": 2.0, "activation": "relu"}}
}

func fxSpec() events.ExperimentSpec {
	seed := int64(1234)
	onCkpt := false
	return events.ExperimentSpec{
		Name:      fxExperiment,
		Trainable: events.Trainable{Name: "train_mnist", Command: []string{"python3", "train.py", "--epochs", "10"}, Dir: "/home/ada/mnist", Resources: fxResources()},
		ParamSpace: map[string]any{
			"lr":       map[string]any{"grid_search": []any{0.001, 0.01}},
			"momentum": map[string]any{"uniform": []any{0.1, 0.9}},
			"model":    map[string]any{"layers": 2.0, "activation": "relu"},
		},
		TuneConfig: events.TuneConfig{
			NumSamples: 2, Metric: "mean_accuracy", Mode: "max", MaxConcurrentTrials: 2,
			TimeBudgetS: 3600, Seed: &seed, SearchAlg: "random", Scheduler: "fifo",
		},
		RunConfig: events.RunConfig{
			StoragePath: "s3://ml-results/tunejet?region=eu-west-1",
			Stop:        map[string]float64{"training_iteration": 10, "mean_accuracy": 0.98},
			FailureConfig: events.FailureConfig{
				MaxFailures: 3, FailFast: events.FailFastOff, HeartbeatTimeoutS: 30,
			},
			CheckpointConfig: events.CheckpointConfig{
				NumToKeep: 2, ScoreAttribute: "mean_accuracy", ScoreOrder: "max",
			},
			SyncConfig: events.SyncConfig{
				SyncPeriodS: 300, SyncTimeoutS: 1800, SyncArtifacts: true, SyncArtifactsOnCheckpoint: &onCkpt,
			},
		},
	}
}

// variants are more valid events, for the branches the fixtures do not take:
// other writers, optional fields left out, the other enum values.
func variants() []*events.Event {
	const controller, runner = "tunejet/controller/ctl-1", "tunejet/runner/spot-7"
	out := []*events.Event{
		{Writer: events.WriterClient, Source: "tunejet/client/ci", Data: &events.ExperimentSubmitted{Spec: events.ExperimentSpec{
			Name:       fxExperiment,
			Trainable:  events.Trainable{Name: "objective"},
			TuneConfig: events.TuneConfig{NumSamples: -1},
			RunConfig:  events.RunConfig{FailureConfig: events.FailureConfig{FailFast: events.FailFastOn}},
		}}},
		{Writer: events.WriterClient, Source: "tunejet/client/ci", Data: &events.ExperimentSubmitted{Spec: events.ExperimentSpec{
			Name:       fxExperiment,
			Trainable:  events.Trainable{Name: "objective"},
			TuneConfig: events.TuneConfig{NumSamples: 4},
			RunConfig:  events.RunConfig{FailureConfig: events.FailureConfig{MaxFailures: -1}},
		}}},
		{Writer: events.WriterClient, Source: "tunejet/client/ci", Data: &events.ExperimentSubmitted{Spec: events.ExperimentSpec{
			Name:       fxExperiment,
			Trainable:  events.Trainable{Name: "objective"},
			TuneConfig: events.TuneConfig{NumSamples: 1},
			RunConfig:  events.RunConfig{FailureConfig: events.FailureConfig{FailFast: events.FailFastRaise}},
		}}},
		{Writer: events.WriterClient, Source: "tunejet/client/ci", Data: &events.ExperimentSubmitted{Spec: events.ExperimentSpec{
			Name:       fxExperiment,
			Trainable:  events.Trainable{Command: []string{"./train.sh"}},
			TuneConfig: events.TuneConfig{NumSamples: 1, Mode: "min", Metric: "loss"},
		}}},
		{Writer: events.WriterController, Source: controller, Data: &events.ExperimentCompleted{
			Reason: "fail_fast", Error: "RuntimeError: CUDA out of memory",
		}},
		{Writer: events.WriterRestorer, Source: "tunejet/restorer/rst-1", Data: &events.ExperimentRestored{
			Resume: events.ResumeConfig{Finished: "resume", Unfinished: "skip", Errored: "skip"}, Source: "log",
			Object: "restored/run-3", Digest: fxDigest,
		}},
		{Writer: events.WriterController, Source: controller, Data: &events.TrialScheduled{
			TrialID: fxTrial, TrialName: "objective_" + fxTrial, DirName: "objective_" + fxTrial, Config: map[string]any{},
			Trainable: events.Trainable{Name: "objective"}, MaxFailures: -1, HeartbeatTimeoutS: 3,
		}},
		{Writer: events.WriterController, Source: controller, Data: &events.TrialFailed{
			TrialID: fxTrial, Attempt: 3, Cause: events.CauseLost, Error: "runner lost: no heartbeat for 30s",
			Final: true, Counted: true,
		}},
		{Writer: events.WriterRunner, Source: runner, Data: &events.TrialFailed{
			TrialID: fxTrial, Attempt: 1, Cause: events.CausePreempted, Error: "runner received SIGTERM",
		}},
		{Writer: events.WriterController, Source: controller, Data: &events.TrialCompleted{
			TrialID: fxTrial, Attempt: 0, Status: events.StatusTerminated, Reason: "stopped",
		}},
		{Writer: events.WriterRunner, Source: runner, Data: &events.TrialCompleted{
			TrialID: fxTrial, Attempt: 4, Status: events.StatusError, Reason: "max_failures",
		}},
		{Writer: events.WriterSyncer, Source: "tunejet/syncer/sync-1", Data: &events.SyncCompleted{Seq: 0, Files: 0, Bytes: 0, DurationS: 0.01}},
		{Writer: events.WriterRunner, Source: runner, Data: &events.TrialReported{
			TrialID: fxTrial, Attempt: 2,
			Earlier: []map[string]any{
				{"loss": 0.2, "training_iteration": 5.0, "done": false},
				{"loss": 0.15, "training_iteration": 6.0, "done": false, "eval": map[string]any{"acc": 0.9}},
			},
			Result: map[string]any{"loss": 0.0912, "training_iteration": 7.0, "done": false},
		}},
	}
	for i, e := range out {
		e.ID = fmt.Sprintf("0b5e2c9d7a1f4c3e9d8b6a5f4e3d%04x", i)
		e.Time = fxTime.Add(time.Duration(i) * time.Minute)
		e.Experiment = fxExperiment
	}
	return out
}

// allValid is every fixture and every variant.
func allValid() []*events.Event {
	var out []*events.Event
	for _, typ := range events.Types() {
		out = append(out, fixture(typ))
	}
	return append(out, variants()...)
}

// fxResources asks for 2 CPUs, the GPU share the trial's config names,
// 2 GB of memory and one custom resource.
func fxResources() map[string]events.ResourceAmount {
	return map[string]events.ResourceAmount{
		"cpu": {Value: 2}, "gpu": {Config: "gpus"}, "memory": {Value: 2e9}, "tpu_slice": {Value: 1},
	}
}
