package restorer

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tunejet/tunejet/api"
	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/restore"
	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/internal/storage"
)

// serve runs a restorer on srv until the test ends and returns a client
// that asks it over NATS, as tune and the CLI do.
func serve(t *testing.T, srv *bustest.Server, cfg Config) func(subject string, data []byte) api.RestoreReply {
	t.Helper()
	b := srv.Bus("restorer") // before the goroutine: it may fail the test
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := New(b, cfg).Run(ctx); err != nil {
			t.Errorf("restorer: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
	nc := srv.Conn()
	bustest.Eventually(t, 30*time.Second, "the restorer's endpoints", func() bool {
		_, err := nc.Request("$SRV.PING.tunejet-restorer", nil, time.Second)
		return err == nil
	})
	return func(subject string, data []byte) api.RestoreReply {
		t.Helper()
		m, err := nc.Request(subject, data, time.Minute)
		if err != nil {
			t.Fatalf("ask %s: %v", subject, err)
		}
		var rep api.RestoreReply
		if err := json.Unmarshal(m.Data, &rep); err != nil {
			t.Fatalf("reply %s: %v", m.Data, err)
		}
		return rep
	}
}

func request(t *testing.T, r api.RestoreRequest) []byte {
	t.Helper()
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestEveryRefusalCrossesTheWireWithItsCode asks a restorer, over NATS,
// every request it refuses: each reply carries the refusal's code and a
// message, and its error matches the code's sentinel with errors.Is.
func TestEveryRefusalCrossesTheWireWithItsCode(t *testing.T) {
	resume := restore.FromFlags(true, false, false)
	other := events.Trainable{Name: "other"}

	// A log that holds the experiment.
	logged := bustest.Start(t)
	loggedPath := storage.Join(t.TempDir(), exp)
	h := &history{t: t, b: logged.Bus("history"), storage: filepath.Dir(loggedPath), now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), reports: 1}
	h.run1()
	withLog := serve(t, logged, Config{})

	// A log that does not: the state is in storage, or nowhere.
	empty := bustest.Start(t)
	noLog := serve(t, empty, Config{})
	stored := func(edit func(dir string)) string {
		storagePath := t.TempDir()
		st := foldLog(t, h.b, 0)
		store(t, storagePath, st, storage.StateFileName(session1))
		if edit != nil {
			edit(filepath.Join(storagePath, exp))
		}
		return storage.Join(storagePath, exp)
	}
	// editState edits the running trial of the stored state.
	editState := func(edit func(tr *state.Trial)) func(string) {
		return func(dir string) {
			st := foldLog(t, h.b, 0)
			edit(st.Trials[trialID(2)])
			store(t, filepath.Dir(dir), st, storage.StateFileName(session1))
		}
	}

	// A restorer whose every restore runs out of time.
	late := serve(t, bustest.Start(t), Config{Timeout: time.Nanosecond})

	tests := []struct {
		name    string
		ask     func(subject string, data []byte) api.RestoreReply
		subject string
		data    []byte
		code    api.Code
		says    string
	}{
		{"not JSON", noLog, api.RestoreSubject, []byte(`{"path": `), api.CodeBadRequest, "bad request"},
		{"a path that is not an experiment's directory", noLog, api.RestoreSubject,
			request(t, api.RestoreRequest{Path: storage.Join(t.TempDir(), "not a name"), Resume: resume}), api.CodeBadRequest, "experiment's directory"},
		{"an unknown resume type", withLog, api.RestoreSubject,
			request(t, api.RestoreRequest{Path: loggedPath, Resume: events.ResumeConfig{Finished: "skip", Unfinished: "retry", Errored: "skip"}}), api.CodeBadRequest, "retry"},
		{"a param space that does not parse", withLog, api.RestoreSubject,
			request(t, api.RestoreRequest{Path: loggedPath, Resume: resume, ParamSpace: map[string]any{"x": map[string]any{"uniform": []any{1.0}}}}), api.CodeBadRequest, "uniform"},
		{"nothing to restore", noLog, api.RestoreSubject,
			request(t, api.RestoreRequest{Path: storage.Join(t.TempDir(), exp), Resume: resume}), api.CodeNoState, "no experiment to restore"},
		{"nothing to restore, asked whether it can be", noLog, api.CanRestoreSubject,
			request(t, api.RestoreRequest{Path: storage.Join(t.TempDir(), exp)}), api.CodeNoState, "no experiment to restore"},
		{"a state file and no trainable", noLog, api.RestoreSubject,
			request(t, api.RestoreRequest{Path: stored(nil), Resume: resume}), api.CodeTrainableRequired, "trust-stored-trainable"},
		{"another trainable than the log's", withLog, api.RestoreSubject,
			request(t, api.RestoreRequest{Path: loggedPath, Resume: resume, Trainable: &other}), api.CodeTrainableDiffers, "Invalid `trainable` input"},
		{"another trainable than the state file's", noLog, api.RestoreSubject,
			request(t, api.RestoreRequest{Path: stored(nil), Resume: resume, Trainable: &other}), api.CodeTrainableDiffers, "Invalid `trainable` input"},
		{"a param space of other keys", withLog, api.RestoreSubject,
			request(t, api.RestoreRequest{Path: loggedPath, Resume: resume, ParamSpace: map[string]any{"y": 1.0}}), api.CodeParamSpaceDiffers, "Invalid `param_space` input"},
		{"a state file that does not decode", noLog, api.CanRestoreSubject,
			request(t, api.RestoreRequest{Path: stored(func(dir string) {
				if err := os.WriteFile(filepath.Join(dir, storage.StateFileName(session1)), []byte(`{"name": `), 0o644); err != nil {
					t.Fatal(err)
				}
			})}), api.CodeStateInvalid, storage.StateFileName(session1)},
		{"a state file naming a trial folder like a path", noLog, api.RestoreSubject,
			request(t, api.RestoreRequest{Path: stored(editState(func(tr *state.Trial) { tr.DirName = "../elsewhere" })), Resume: resume, Trainable: &genuine}),
			api.CodeStateInvalid, "../elsewhere"},
		{"a trial to resume that lost its latest checkpoint", noLog, api.RestoreSubject,
			request(t, api.RestoreRequest{Path: stored(editState(func(tr *state.Trial) {
				tr.Checkpoints = []events.CheckpointRef{{Name: "checkpoint_000001", Index: 1, Digest: "sha256:" + strings.Repeat("0", 64), Iteration: 1}}
				tr.Persisted = nil
			})), Resume: resume, Trainable: &genuine}), api.CodeCheckpointLost, "checkpoint_000001"},
		{"out of time", late, api.RestoreSubject,
			request(t, api.RestoreRequest{Path: loggedPath, Resume: resume}), api.CodeInternal, "deadline"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := tt.ask(tt.subject, tt.data)
			if rep.OK || rep.Code != tt.code || !strings.Contains(rep.Error, tt.says) {
				t.Fatalf("reply %+v; want refused with code %q, saying %q", rep, tt.code, tt.says)
			}
			err := rep.Err()
			if !errors.Is(err, tt.code.Err()) || err.Error() != rep.Error {
				t.Errorf("reply error %v; want the restorer's message, matching %v", err, tt.code.Err())
			}
		})
	}
	// Nothing refused was published.
	if last, err := empty.Bus("check").LastSeq(t.Context(), events.ExperimentSubjects(exp)); err != nil || last != 0 {
		t.Errorf("refused restores published up to %d (%v); want nothing", last, err)
	}
}
