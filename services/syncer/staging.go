package syncer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"gocloud.dev/blob"

	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/internal/storage"
)

// staging keeps the trials' result files in a local directory while they
// grow, in Ray's formats (storage.AppendResultLine, storage.Progress,
// storage.AppendFailure); a sync uploads the changed files whole.
type staging struct {
	dir    string       // local staging directory of the experiment
	bucket *blob.Bucket // the experiment's part of storage

	trials  map[string]*trialFiles // by trial id, loaded lazily
	params  map[string]bool        // trials whose params.json is not written yet
	changed map[string]bool        // trials whose result files changed since they were uploaded
	// finished are trials that ended since the last upload of their files.
	finished []string
	// line and row are reused for every result written.
	line, row []byte
}

func newStaging(dir string, bucket *blob.Bucket) *staging {
	return &staging{dir: dir, bucket: bucket, trials: map[string]*trialFiles{}, params: map[string]bool{}, changed: map[string]bool{}}
}

// trialFiles is a trial's staged result files, kept open behind buffers
// while the trial runs.
type trialFiles struct {
	dir      string           // local staging directory of the trial
	rows     int              // results in result.json
	failures int              // entries in error.txt
	progress storage.Progress // progress.csv columns
	open     map[string]*appender
}

// appender is an open staged file.
type appender struct {
	f *os.File
	w *bufio.Writer
}

// append adds data to a staged file, opening it on first use.
func (f *trialFiles) append(name string, data []byte) error {
	if f.open == nil {
		f.open = map[string]*appender{}
	}
	a := f.open[name]
	if a == nil {
		fh, err := os.OpenFile(filepath.Join(f.dir, name), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return fmt.Errorf("stage %s: %w", name, err)
		}
		a = &appender{f: fh, w: bufio.NewWriterSize(fh, 64<<10)}
		f.open[name] = a
	}
	if _, err := a.w.Write(data); err != nil {
		return fmt.Errorf("stage %s: %w", name, err)
	}
	return nil
}

// flush writes the buffers out, so the files can be uploaded.
func (f *trialFiles) flush() error {
	for name, a := range f.open {
		if err := a.w.Flush(); err != nil {
			return fmt.Errorf("stage %s: %w", name, err)
		}
	}
	return nil
}

// close flushes and closes the open files.
func (f *trialFiles) close() error {
	err := f.flush()
	for _, a := range f.open {
		if cerr := a.f.Close(); err == nil {
			err = cerr
		}
	}
	f.open = nil
	return err
}

// filesOf returns the trial's staged files, preparing them on first use:
// the stored copies are downloaded and cut to rows results and failures
// entries — what the fold had counted before the event being staged — so
// lines stored after the last durable snapshot are written once more, and
// only once.
func (s *staging) filesOf(ctx context.Context, t *state.Trial, rows, failures int) (*trialFiles, error) {
	if f := s.trials[t.ID]; f != nil {
		return f, nil
	}
	f := &trialFiles{dir: filepath.Join(s.dir, t.DirName)}
	if err := os.MkdirAll(f.dir, 0o755); err != nil {
		return nil, fmt.Errorf("staging for %s: %w", t.ID, err)
	}
	for _, name := range storage.ResultFiles {
		data, err := storage.ReadAll(ctx, s.bucket, t.DirName+"/"+name)
		if errors.Is(err, fs.ErrNotExist) {
			data = nil
		} else if err != nil {
			return nil, err
		}
		var keep []byte
		switch name {
		case storage.ResultFile:
			keep, f.rows = storage.CutResults(data, rows)
		case storage.ProgressFile:
			keep, f.progress.Header = storage.CutProgress(data, rows)
		case storage.ErrorFile:
			keep, f.failures = storage.CutErrors(data, failures)
		}
		if err := os.WriteFile(filepath.Join(f.dir, name), keep, 0o644); err != nil {
			return nil, fmt.Errorf("staging for %s: %w", t.ID, err)
		}
	}
	s.trials[t.ID] = f
	return f, nil
}

// appendResult stages the trial's newest result as a result.json line and
// a progress.csv row.
func (s *staging) appendResult(ctx context.Context, t *state.Trial) error {
	f, err := s.filesOf(ctx, t, t.NumResults-1, t.NumFailures)
	if err != nil {
		return err
	}
	if t.NumResults <= f.rows {
		return nil
	}
	line, err := storage.AppendResultLine(s.line[:0], t.LastResult, t.Config)
	if err != nil {
		return fmt.Errorf("result of %s: %w", t.ID, err)
	}
	s.line = line
	if err := f.append(storage.ResultFile, line); err != nil {
		return err
	}
	f.rows = t.NumResults
	s.changed[t.ID] = true
	s.row = f.progress.AppendRow(s.row[:0], t.LastResult)
	return f.append(storage.ProgressFile, s.row)
}

// appendFailure stages the trial's newest failure, which happened at at,
// as an error.txt entry dated in local time, as Ray dates it.
func (s *staging) appendFailure(ctx context.Context, t *state.Trial, at time.Time) error {
	f, err := s.filesOf(ctx, t, t.NumResults, t.NumFailures-1)
	if err != nil {
		return err
	}
	if t.NumFailures <= f.failures {
		return nil
	}
	entry := storage.AppendFailure(nil, t.NumFailures, at.Local(), t.LastError)
	if err := f.append(storage.ErrorFile, entry); err != nil {
		return err
	}
	f.failures = t.NumFailures
	s.changed[t.ID] = true
	return nil
}

// uploads lists, by key, the files of st's trials in params (params.json)
// and changed (result files) and flushes the staged ones; the content is
// read when the upload runs, so a retry reads it again.
func (s *staging) uploads(st *state.Experiment, params, changed map[string]bool) (map[string]func() ([]byte, error), error) {
	out := map[string]func() ([]byte, error){}
	for id := range params {
		t := st.Trials[id]
		out[t.DirName+"/"+storage.ParamsFile] = func() ([]byte, error) { return storage.Params(t.Config) }
	}
	for id := range changed {
		t, f := st.Trials[id], s.trials[id]
		if err := f.flush(); err != nil {
			return nil, err
		}
		for _, name := range storage.ResultFiles {
			path := filepath.Join(f.dir, name)
			if info, err := os.Stat(path); err != nil || info.Size() == 0 {
				continue
			}
			out[t.DirName+"/"+name] = func() ([]byte, error) { return os.ReadFile(path) }
		}
	}
	return out, nil
}

// synced forgets what a sync wrote: every pending params.json and change.
func (s *staging) synced() {
	s.params, s.changed = map[string]bool{}, map[string]bool{}
}

// drop closes a trial's staged files and removes them.
func (s *staging) drop(id string) {
	if f := s.trials[id]; f != nil {
		_ = f.close()
		_ = os.RemoveAll(f.dir)
		delete(s.trials, id)
	}
}

// forgetFinished drops the staging of st's trials that have ended (and
// are synced).
func (s *staging) forgetFinished(st *state.Experiment) {
	for id := range s.trials {
		if t := st.Trials[id]; t != nil && t.Finished() {
			s.drop(id)
		}
	}
}

// close closes the staged files still open.
func (s *staging) close() {
	for _, f := range s.trials {
		_ = f.close()
	}
}
