package syncer

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"gocloud.dev/blob/memblob"

	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/internal/storage"
	"github.com/tunejet/tunejet/internal/tboard"
	"github.com/tunejet/tunejet/internal/tboard/tboardtest"
)

// Event files in a trial folder ahead of the snapshot: the one a syncer on
// another host started, holding results 1 to 3 and a record cut short, and
// a trainable's own, which is left alone.
const (
	storedEvents  = "events.out.tfevents.1767323045.otherhost"
	trainerEvents = "events.out.tfevents.1767323046.trainer"
)

func storedEventFiles() map[string]string {
	data := tboard.AppendStart(nil, 1767323045)
	for i := 1; i <= 3; i++ {
		data = tboard.AppendResult(data, float64(i), int64(i), []tboard.Scalar{{Tag: "ray/tune/it", Value: float64(i)}})
	}
	data = append(data, tboard.AppendResult(nil, 4, 4, nil)[:9]...)
	return map[string]string{storedEvents: string(data), trainerEvents: string(tboard.AppendResult(nil, 1, 1, nil))}
}

// checkEvents checks an event file resumed from a snapshot that counted
// one result, after the second was written again: the start, result 1 as
// stored, result 2 as written now.
func checkEvents(t *testing.T, data []byte) {
	t.Helper()
	evs := tboardtest.ReadData(t, data)
	if len(evs) != 3 || evs[0].Writer != "tunejet" || evs[1].Step != 1 || evs[1].Scalars()["ray/tune/it"] != 1 || evs[2].Step != 2 {
		t.Errorf("the event file holds %+v; want its start, result 1 as stored and result 2", evs)
	}
}

// TestStagingResumesFromTheSnapshot: files stored ahead of the snapshot a
// syncer resumes from (it died after uploading them, before the snapshot)
// are cut back to what the snapshot counted, so the results and failures
// folded again are written once, and the upload holds each once.
func TestStagingResumesFromTheSnapshot(t *testing.T) {
	ctx := t.Context()
	bucket := memblob.OpenBucket(nil)
	defer func() { _ = bucket.Close() }()
	dir := "fn_t1"
	stored := map[string]string{
		storage.ResultFile:   "{\"training_iteration\":1}\n{\"training_iteration\":2}\n{\"training_iteration\":3}\n",
		storage.ProgressFile: "training_iteration\n1\n2\n3\n",
		storage.ErrorFile:    "Failure # 1 (occurred at 2026-01-02_03-04-05)\nfirst\nFailure # 2 (occurred at 2026-01-02_03-04-06)\nsecond\n",
	}
	maps.Copy(stored, storedEventFiles())
	for name, content := range stored {
		if err := storage.WriteAtomic(ctx, bucket, dir+"/"+name, []byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	s := newStaging(t.TempDir(), bucket, nil)
	defer s.close()

	// The snapshot counted 1 result and 1 failure; the log then brings the
	// second result again, and the second failure.
	tr := &state.Trial{ID: "t1", DirName: dir, Config: map[string]any{"x": 1.0}, NumResults: 2, NumFailures: 1,
		LastResult: map[string]any{"training_iteration": 2.0}}
	if err := s.appendResult(ctx, tr); err != nil {
		t.Fatal(err)
	}
	tr.NumFailures, tr.LastError = 2, "second"
	if err := s.appendFailure(ctx, tr, time.Date(2026, 1, 2, 3, 4, 6, 0, time.Local)); err != nil {
		t.Fatal(err)
	}
	if err := s.appendResult(ctx, tr); err != nil { // met again: written once
		t.Fatal(err)
	}

	st := experiment(tr)
	uploads, err := s.uploads(st, map[string]bool{"t1": true}, s.changed)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		dir + "/" + storage.ResultFile:   "{\"training_iteration\":1}\n{\"config\":{\"x\":1},\"training_iteration\":2}\n",
		dir + "/" + storage.ProgressFile: "training_iteration\n1\n2\n",
		dir + "/" + storage.ErrorFile:    stored[storage.ErrorFile],
		dir + "/" + storage.ParamsFile:   "{\n  \"x\": 1\n}\n",
	}
	if read := uploads[dir+"/"+storedEvents]; read == nil {
		t.Errorf("%s is not uploaded", storedEvents)
	} else if data, err := read(); err != nil {
		t.Error(err)
	} else {
		checkEvents(t, data)
	}
	if len(uploads) != len(want)+1 {
		t.Errorf("uploads %d files, want %d", len(uploads), len(want))
	}
	for key, content := range want {
		read := uploads[key]
		if read == nil {
			t.Errorf("%s is not uploaded", key)
			continue
		}
		got, err := read()
		if err != nil || string(got) != content {
			t.Errorf("%s:\n%s(%v)\nwant\n%s", key, got, err, content)
		}
	}

	s.drop("t1")
	if _, err := os.Stat(filepath.Join(s.dir, dir)); !os.IsNotExist(err) {
		t.Errorf("a dropped trial's staging is still there: %v", err)
	}
	if s.trials["t1"] != nil {
		t.Error("a dropped trial's files are still open")
	}
}

// TestStagingInPlaceResumesFromTheSnapshot: on a file system the result
// files are written in place. Lines stored ahead of the snapshot a syncer
// resumes from (it died before the snapshot) are cut off the files in
// storage, the results and failures folded again are appended once, and
// nothing is left to upload but params.json.
func TestStagingInPlaceResumesFromTheSnapshot(t *testing.T) {
	ctx := t.Context()
	dir := &storage.Dir{Root: t.TempDir()}
	trialDir := "fn_t1"
	stored := map[string]string{
		storage.ResultFile:   "{\"training_iteration\":1}\n{\"training_iteration\":2}\n{\"training_iteration\":3}\n{\"trai",
		storage.ProgressFile: "training_iteration\n1\n2\n3\n",
		storage.ErrorFile:    "Failure # 1 (occurred at 2026-01-02_03-04-05)\nfirst\nFailure # 2 (occurred at 2026-01-02_03-04-06)\nsecond\n",
	}
	maps.Copy(stored, storedEventFiles())
	for name, content := range stored {
		if err := dir.WriteAtomic(trialDir+"/"+name, []byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	s := newStaging(t.TempDir(), memblob.OpenBucket(nil), dir)
	defer s.close()

	// The snapshot counted 1 result and 1 failure; the log then brings the
	// second result again, and the second failure.
	tr := &state.Trial{ID: "t1", DirName: trialDir, Config: map[string]any{"x": 1.0}, NumResults: 2, NumFailures: 1,
		LastResult: map[string]any{"training_iteration": 2.0}}
	if err := s.appendResult(ctx, tr); err != nil {
		t.Fatal(err)
	}
	tr.NumFailures, tr.LastError = 2, "second"
	if err := s.appendFailure(ctx, tr, time.Date(2026, 1, 2, 3, 4, 6, 0, time.Local)); err != nil {
		t.Fatal(err)
	}
	if err := s.appendResult(ctx, tr); err != nil { // met again: written once
		t.Fatal(err)
	}
	if err := s.writeParams(tr); err != nil {
		t.Fatal(err)
	}
	if err := s.flushWritten(); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		storage.ResultFile:   "{\"training_iteration\":1}\n{\"config\":{\"x\":1},\"training_iteration\":2}\n",
		storage.ProgressFile: "training_iteration\n1\n2\n",
		storage.ErrorFile:    stored[storage.ErrorFile],
		storage.ParamsFile:   "{\n  \"x\": 1\n}\n",
	}
	for name, content := range want {
		got, err := dir.Read(trialDir + "/" + name)
		if err != nil || string(got) != content {
			t.Errorf("%s in storage:\n%s(%v)\nwant\n%s", name, got, err, content)
		}
	}

	data, err := dir.Read(trialDir + "/" + storedEvents)
	if err != nil {
		t.Fatal(err)
	}
	checkEvents(t, data)
	if data, err := dir.Read(trialDir + "/" + trainerEvents); err != nil || string(data) != stored[trainerEvents] {
		t.Errorf("the trainable's event file changed: %q (%v)", data, err)
	}
	uploads, err := s.uploads(experiment(tr), s.params, s.changed)
	if err != nil {
		t.Fatal(err)
	}
	if len(uploads) != 0 {
		t.Errorf("uploads %d files, want none: the files are in storage already", len(uploads))
	}
	s.drop("t1")
	if _, err := dir.Read(trialDir + "/" + storage.ResultFile); err != nil {
		t.Errorf("dropping the trial's files removed them from storage: %v", err)
	}
}

// TestStagingWritesTheHParamsOfAnEndOnce: a syncer killed after it wrote
// a trial's hparams at its end, before a snapshot counted the end, left
// them in the event file; the syncer that folds the end again cuts them
// off with the rest ahead of the snapshot and writes them once.
func TestStagingWritesTheHParamsOfAnEndOnce(t *testing.T) {
	ctx := t.Context()
	dir := &storage.Dir{Root: t.TempDir()}
	trialDir := "fn_t1"
	stored := tboard.AppendStart(nil, 1767323045)
	for i := 1; i <= 3; i++ {
		stored = tboard.AppendResult(stored, float64(i), int64(i), []tboard.Scalar{{Tag: "ray/tune/it", Value: float64(i)}})
	}
	stored = tboard.AppendHParams(stored, 4, map[string]any{"x": 1.0}, []string{"ray/tune/it"})
	if err := dir.WriteAtomic(trialDir+"/"+storedEvents, stored); err != nil {
		t.Fatal(err)
	}
	s := newStaging(t.TempDir(), memblob.OpenBucket(nil), dir)
	defer s.close()
	end := time.Date(2026, 1, 2, 3, 4, 9, 0, time.UTC)
	tr := &state.Trial{ID: "t1", DirName: trialDir, Config: map[string]any{"x": 1.0}, NumResults: 3, Status: "TERMINATED",
		LastResult: map[string]any{"training_iteration": 3.0, "it": 3.0}, EndTime: end}
	if err := s.appendHParams(ctx, tr, map[string]any{"x": 1.0}, end); err != nil {
		t.Fatal(err)
	}
	if err := s.flushWritten(); err != nil {
		t.Fatal(err)
	}
	data, err := dir.Read(trialDir + "/" + storedEvents)
	if err != nil {
		t.Fatal(err)
	}
	evs := tboardtest.ReadData(t, data)
	var tags []string
	for _, ev := range evs[1:] {
		for _, v := range ev.Values {
			tags = append(tags, v.Tag)
		}
	}
	want := []string{"ray/tune/it", "ray/tune/it", "ray/tune/it", "_hparams_/experiment", "_hparams_/session_start_info", "_hparams_/session_end_info"}
	if !slices.Equal(tags, want) {
		t.Fatalf("the event file holds %v, want %v", tags, want)
	}
	if wall := evs[len(evs)-1].WallTime; wall != float64(end.Unix()) {
		t.Errorf("the hparams at %v, want the end of the trial %v", wall, end.Unix())
	}
}
