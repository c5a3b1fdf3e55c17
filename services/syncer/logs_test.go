package syncer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"gocloud.dev/blob/memblob"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/internal/storage"
)

// TestShutdownCancelsASyncWithoutAnError: a sync the shutdown cancels is
// logged at info and not announced as sync.failed (the last sync, or the
// next syncer, does it); a sync that fails is still an error, announced.
func TestShutdownCancelsASyncWithoutAnError(t *testing.T) {
	t.Parallel()
	srv := bustest.Start(t)
	var logs bytes.Buffer
	a := announcer{bus: srv.Bus("syncer"), exp: "exp", log: zerolog.New(&logs)}

	stopped, cancel := context.WithCancel(t.Context())
	cancel()
	a.failure(stopped, "sync up experiment exp", fmt.Errorf("sync up experiment exp: %w", context.Canceled), 3)
	if strings.Contains(logs.String(), `"level":"error"`) || !strings.Contains(logs.String(), `"level":"info"`) {
		t.Errorf("a sync the shutdown cancelled is logged:\n%s\nwant info, not error", logs.String())
	}
	logs.Reset()
	a.failure(t.Context(), "sync up experiment exp", errors.New("storage refused"), 3)
	if !strings.Contains(logs.String(), `"level":"error"`) {
		t.Errorf("a failed sync is logged:\n%s\nwant an error", logs.String())
	}

	var failed []string
	err := srv.Bus("test").Replay(t.Context(), events.ExperimentSubjects("exp"), func(ev *events.Event) {
		if p, ok := ev.Data.(*events.SyncFailed); ok {
			failed = append(failed, p.Error)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(failed) != 1 || failed[0] != "storage refused" {
		t.Errorf("sync.failed events %q; want the failed sync's alone", failed)
	}
}

// TestParamsNotWrittenInPlaceAreNoError: when params.json cannot be
// written in the trial's folder (a runner starting the trial removes the
// temporary file it is written through, or here, the folder cannot be
// made), the next sync writes it: nothing is lost, so it is a warning, not
// an error, and the sync's uploads carry it.
func TestParamsNotWrittenInPlaceAreNoError(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	notADir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notADir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	bucket := memblob.OpenBucket(nil)
	defer func() { _ = bucket.Close() }()
	var logs bytes.Buffer
	st := state.New("exp")
	st.Trials["t1"] = &state.Trial{ID: "t1", DirName: "f_t1", Config: map[string]any{"x": 1.0}}
	w := &writer{exp: "exp", log: zerolog.New(&logs), st: st, bucket: bucket,
		files: newStaging(t.TempDir(), bucket, &storage.Dir{Root: filepath.Join(notADir, "exp")})}
	defer w.files.close()

	w.do(ctx, []job{{kind: writeParams, trial: "t1"}})
	if strings.Contains(logs.String(), `"level":"error"`) || !strings.Contains(logs.String(), `"level":"warn"`) {
		t.Errorf("params.json not written in place is logged:\n%s\nwant a warning, not an error", logs.String())
	}
	uploads, err := w.files.uploads(w.st, w.files.params, w.files.changed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.upload(ctx, uploads); err != nil {
		t.Fatal(err)
	}
	b, err := bucket.ReadAll(ctx, "f_t1/"+storage.ParamsFile)
	if err != nil || !strings.Contains(string(b), `"x": 1`) {
		t.Errorf("params.json after the next sync: %q, %v; want the trial's config", b, err)
	}
}
