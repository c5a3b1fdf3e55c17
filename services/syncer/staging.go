package syncer

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"time"

	"gocloud.dev/blob"

	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/internal/storage"
)

// staging keeps the trials' result files while they grow, in Ray's
// formats (storage.AppendResultLine, storage.Progress,
// storage.AppendFailure). On a bucket they grow in a local directory and a
// sync uploads the changed files whole. On a storage path that is a
// directory (local or NFS) they grow in place, in the trial's folder, and
// are flushed as results arrive (flushWritten): readers see rows within a
// second, and a sync only makes them durable before its snapshot.
type staging struct {
	dir    string       // local staging directory of the experiment
	bucket *blob.Bucket // the experiment's part of storage
	// direct is the experiment's directory when storage is a file system,
	// nil for a bucket.
	direct *storage.Dir

	trials  map[string]*trialFiles // by trial id, loaded lazily
	params  map[string]bool        // trials whose params.json is not written yet
	changed map[string]bool        // trials whose result files changed since they were uploaded
	// finished are trials that ended since the last upload of their files.
	finished []string
	// unflushed are the trials whose files written in place hold rows
	// not yet flushed to them.
	unflushed map[string]*trialFiles
	// line and row are reused for every result written.
	line, row []byte
}

// newStaging stages in dir the result files of the experiment in bucket,
// or writes them in place in direct when storage is a file system (direct
// not nil).
func newStaging(dir string, bucket *blob.Bucket, direct *storage.Dir) *staging {
	return &staging{
		dir: dir, bucket: bucket, direct: direct,
		trials: map[string]*trialFiles{}, params: map[string]bool{}, changed: map[string]bool{},
		unflushed: map[string]*trialFiles{},
	}
}

// trialFiles is a trial's staged result files, kept open behind buffers
// while the trial runs.
type trialFiles struct {
	dir      string           // local staging directory of the trial, or its folder in storage
	inPlace  bool             // dir is the trial's folder in storage
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

// append adds data to a staged file, opening it on first use. data goes
// out in a single write unless the file is closed first, so a process
// killed meanwhile leaves whole lines and, at worst, a last line cut
// short, which the next syncer cuts off (filesOf).
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
	if len(data) > a.w.Available() && a.w.Buffered() > 0 {
		if err := a.w.Flush(); err != nil {
			return fmt.Errorf("stage %s: %w", name, err)
		}
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

// sync flushes the buffers and makes the files durable, so a snapshot
// that counts their lines may follow.
func (f *trialFiles) sync() error {
	if err := f.flush(); err != nil {
		return err
	}
	for name, a := range f.open {
		if err := a.f.Sync(); err != nil {
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
// the stored copies are cut to rows results and failures entries — what
// the fold had counted before the event being staged — so lines stored
// after the last durable snapshot are written once more, and only once.
// On a bucket the cut copies are downloaded into the staging directory;
// on a file system the files in storage are cut where they are (replaced
// whole, atomically, only when they hold more) and then appended to.
func (s *staging) filesOf(ctx context.Context, t *state.Trial, rows, failures int) (*trialFiles, error) {
	if f := s.trials[t.ID]; f != nil {
		return f, nil
	}
	f := &trialFiles{dir: filepath.Join(s.dir, t.DirName)}
	if s.direct != nil {
		p, err := s.direct.Path(t.DirName)
		if err != nil {
			return nil, err
		}
		f.dir, f.inPlace = p, true
	}
	if err := os.MkdirAll(f.dir, 0o755); err != nil {
		return nil, fmt.Errorf("staging for %s: %w", t.ID, err)
	}
	for _, name := range storage.ResultFiles {
		var data []byte
		var err error
		if f.inPlace {
			data, err = s.direct.Read(t.DirName + "/" + name)
		} else {
			data, err = storage.ReadAll(ctx, s.bucket, t.DirName+"/"+name)
		}
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
		if err := f.cut(s.direct, t.DirName+"/"+name, data, keep); err != nil {
			return nil, fmt.Errorf("staging for %s: %w", t.ID, err)
		}
	}
	s.trials[t.ID] = f
	return f, nil
}

// cut makes the file rel, which holds data, hold keep: a staged copy is
// written; a file in storage (in dir) is left alone when it already holds
// keep, removed when keep is empty, else replaced atomically.
func (f *trialFiles) cut(dir *storage.Dir, rel string, data, keep []byte) error {
	if !f.inPlace {
		return os.WriteFile(filepath.Join(f.dir, path.Base(rel)), keep, 0o644)
	}
	switch {
	case bytes.Equal(data, keep):
		return nil
	case len(keep) == 0:
		p, err := dir.Path(rel)
		if err != nil {
			return err
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("cut %s: %w", p, err)
		}
		return nil
	default:
		return dir.WriteAtomic(rel, keep)
	}
}

// written notes that f, the files of trial id, changed: a bucket's go
// with the next upload; files in storage are flushed by flushWritten and
// made durable before the next snapshot.
func (s *staging) written(id string, f *trialFiles) {
	s.changed[id] = true
	if f.inPlace {
		s.unflushed[id] = f
	}
}

// flushWritten flushes the rows written in place since the last flush, so
// that readers of storage see them. It reports the first failure; the
// rows stay buffered and go with the next flush.
func (s *staging) flushWritten() error {
	var first error
	for id, f := range s.unflushed {
		if err := f.flush(); err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		delete(s.unflushed, id)
	}
	return first
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
	s.written(t.ID, f)
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
	s.written(t.ID, f)
	return nil
}

// writeParams writes the trial's params.json in place when storage is a
// file system; on a bucket, or when that fails, it goes with the next
// sync.
func (s *staging) writeParams(t *state.Trial) error {
	if s.direct != nil {
		data, err := storage.Params(t.Config)
		if err == nil {
			err = s.direct.WriteAtomic(t.DirName+"/"+storage.ParamsFile, data)
		}
		if err == nil {
			delete(s.params, t.ID)
			return nil
		}
		s.params[t.ID] = true
		return fmt.Errorf("params of %s (the next sync writes them): %w", t.ID, err)
	}
	s.params[t.ID] = true
	return nil
}

// uploads lists, by key, the files of st's trials in params (params.json)
// and changed (result files) and flushes the staged ones; the content is
// read when the upload runs, so a retry reads it again. Result files
// written in place need no upload: they are flushed and made durable
// (before the snapshot that counts their lines).
func (s *staging) uploads(st *state.Experiment, params, changed map[string]bool) (map[string]func() ([]byte, error), error) {
	out := map[string]func() ([]byte, error){}
	for id := range params {
		t := st.Trials[id]
		out[t.DirName+"/"+storage.ParamsFile] = func() ([]byte, error) { return storage.Params(t.Config) }
	}
	for id := range changed {
		t, f := st.Trials[id], s.trials[id]
		if f.inPlace {
			if err := f.sync(); err != nil {
				return nil, err
			}
			delete(s.unflushed, id)
			continue
		}
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

// drop closes a trial's staged files and removes the staged copies
// (never the files in storage).
func (s *staging) drop(id string) {
	if f := s.trials[id]; f != nil {
		_ = f.close()
		if !f.inPlace {
			_ = os.RemoveAll(f.dir)
		}
		delete(s.trials, id)
		delete(s.unflushed, id)
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
