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

	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/internal/storage"
)

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
func (w *writer) filesOf(ctx context.Context, t *state.Trial, rows, failures int) (*trialFiles, error) {
	if f := w.files[t.ID]; f != nil {
		return f, nil
	}
	f := &trialFiles{dir: filepath.Join(w.stage, t.DirName)}
	if err := os.MkdirAll(f.dir, 0o755); err != nil {
		return nil, fmt.Errorf("staging for %s: %w", t.ID, err)
	}
	for _, name := range storage.ResultFiles {
		data, err := storage.ReadAll(ctx, w.bucket, t.DirName+"/"+name)
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
	w.files[t.ID] = f
	return f, nil
}

// uploadFinished uploads the result files (and params.json, if still
// pending) of the trials that ended, and drops their staging: their files
// are final, so storage need not wait for the next sync, and the final
// sync at the end of the experiment has only the last trials left to
// write. One attempt, bounded by the sync timeout: what fails stays
// staged and goes with the next sync. The snapshot is left to the sync;
// files ahead of it are cut back to it if a syncer resumes from it (see
// filesOf).
func (w *writer) uploadFinished(ctx context.Context) {
	ids := w.finished
	w.finished = nil
	params, changed := map[string]bool{}, map[string]bool{}
	for _, id := range ids {
		if t := w.st.Trials[id]; t == nil || !t.Finished() {
			continue // brought back by a restore
		}
		if w.params[id] {
			params[id] = true
		}
		if w.changed[id] && w.files[id] != nil {
			changed[id] = true
		}
	}
	if len(params)+len(changed) == 0 {
		return
	}
	for id := range changed {
		if err := w.files[id].flush(); err != nil {
			w.log.Warn().Err(err).Str("trial", id).Msg("stage the files of a finished trial; the next sync writes them")
			return
		}
	}
	uctx, cancel := context.WithTimeout(ctx, w.sync.Config().SyncTimeout)
	defer cancel()
	err := parallel(uctx, uploadConcurrency, w.uploadsOf(params, changed), func(ctx context.Context, key string, data func() ([]byte, error)) error {
		b, err := data()
		if err != nil {
			return err
		}
		return storage.WriteAtomic(ctx, w.bucket, key, b)
	})
	if err != nil {
		w.log.Warn().Err(err).Msg("upload the files of finished trials; the next sync writes them")
		return
	}
	for id := range params {
		delete(w.params, id)
	}
	for id := range changed {
		delete(w.changed, id)
		_ = w.files[id].close()
		_ = os.RemoveAll(w.files[id].dir)
		delete(w.files, id)
	}
}

// appendResult stages the trial's newest result as a result.json line and
// a progress.csv row.
func (w *writer) appendResult(ctx context.Context, t *state.Trial) error {
	f, err := w.filesOf(ctx, t, t.NumResults-1, t.NumFailures)
	if err != nil {
		return err
	}
	if t.NumResults <= f.rows {
		return nil
	}
	line, err := storage.AppendResultLine(w.line[:0], t.LastResult, t.Config)
	if err != nil {
		return fmt.Errorf("result of %s: %w", t.ID, err)
	}
	w.line = line
	if err := f.append(storage.ResultFile, line); err != nil {
		return err
	}
	f.rows = t.NumResults
	w.changed[t.ID] = true
	w.row = f.progress.AppendRow(w.row[:0], t.LastResult)
	return f.append(storage.ProgressFile, w.row)
}

// appendFailure stages Ray's "Failure # N (occurred at <date>)" entry.
func (w *writer) appendFailure(ctx context.Context, t *state.Trial, at time.Time) error {
	f, err := w.filesOf(ctx, t, t.NumResults, t.NumFailures-1)
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
	w.changed[t.ID] = true
	return nil
}
