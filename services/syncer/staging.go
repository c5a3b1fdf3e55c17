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
	"slices"
	"strings"
	"time"

	"gocloud.dev/blob"

	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/internal/storage"
	"github.com/tunejet/tunejet/internal/tboard"
)

// staging keeps the trials' result files while they grow, in Ray's
// formats (storage.AppendResultLine, storage.Progress,
// storage.AppendFailure, and tboard's TensorBoard event file). On a
// bucket they grow in a local directory and a sync uploads the changed
// files whole. On a storage path that is a directory (local or NFS) they
// grow in place, in the trial's folder, and are flushed as results arrive
// (flushWritten): readers see rows within a second, and a sync only makes
// them durable before its snapshot.
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
	// tensorboard: write each trial's TensorBoard event file; host names
	// the new ones (tboard.FileName).
	tensorboard bool
	host        string
	// line, row and record are reused for every result written.
	line, row, record []byte
}

// newStaging stages in dir the result files of the experiment in bucket,
// or writes them in place in direct when storage is a file system (direct
// not nil).
func newStaging(dir string, bucket *blob.Bucket, direct *storage.Dir) *staging {
	host, err := os.Hostname()
	if err != nil {
		host = "localhost"
	}
	return &staging{
		dir: dir, bucket: bucket, direct: direct,
		trials: map[string]*trialFiles{}, params: map[string]bool{}, changed: map[string]bool{},
		unflushed: map[string]*trialFiles{}, tensorboard: true, host: host,
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
	// events names the TensorBoard event file ("" until there is one),
	// which holds eventRows results.
	events    string
	eventRows int
	open      map[string]*appender
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
	if s.tensorboard {
		if err := s.cutEvents(ctx, t, f, rows); err != nil {
			return nil, fmt.Errorf("staging for %s: %w", t.ID, err)
		}
	}
	s.trials[t.ID] = f
	return f, nil
}

// cutEvents finds the trial's TensorBoard event file, the one the syncer
// started (tboard.Ours: not a trainable's own, copied as an artifact), and
// cuts it to rows results, as filesOf cuts the other files.
func (s *staging) cutEvents(ctx context.Context, t *state.Trial, f *trialFiles, rows int) error {
	name, data, err := s.findEvents(ctx, t.DirName, f)
	if err != nil || name == "" {
		return err
	}
	keep, n := tboard.Cut(data, rows)
	f.events, f.eventRows = name, n
	return f.cut(s.direct, t.DirName+"/"+name, data, keep)
}

// findEvents returns the name and content of the event file the syncer
// started in the trial folder dir, if there is one: its name holds the
// time and host of the syncer that started it, which may not be this one.
func (s *staging) findEvents(ctx context.Context, dir string, f *trialFiles) (string, []byte, error) {
	var names []string
	if f.inPlace {
		entries, err := os.ReadDir(f.dir)
		if err != nil {
			return "", nil, fmt.Errorf("list %s: %w", f.dir, err)
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), tboard.FilePrefix) && e.Type().IsRegular() {
				names = append(names, e.Name())
			}
		}
	} else {
		prefix := dir + "/" + tboard.FilePrefix
		for obj, err := range storage.Objects(ctx, s.bucket, &blob.ListOptions{Prefix: prefix}) {
			if err != nil {
				return "", nil, err
			}
			if name := path.Base(obj.Key); !obj.IsDir && dir+"/"+name == obj.Key {
				names = append(names, name)
			}
		}
	}
	slices.Sort(names)
	for _, name := range names {
		var data []byte
		var err error
		if f.inPlace {
			data, err = s.direct.Read(dir + "/" + name)
		} else {
			data, err = storage.ReadAll(ctx, s.bucket, dir+"/"+name)
		}
		if err != nil {
			return "", nil, err
		}
		if tboard.Ours(data) {
			return name, data, nil
		}
	}
	return "", nil, nil
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
	if err := f.append(storage.ProgressFile, s.row); err != nil {
		return err
	}
	if !s.tensorboard {
		return nil
	}
	return s.appendEvents(t, f)
}

// appendEvents writes the trial's newest result to its TensorBoard event
// file, starting the file first if it has none. The file holds a record
// per result, so results it missed (it was lost, or written with
// TensorBoard off) get an empty one: a later cut to n results then keeps
// the first n.
func (s *staging) appendEvents(t *state.Trial, f *trialFiles) error {
	if t.NumResults <= f.eventRows {
		return nil
	}
	if f.events == "" {
		if err := s.startEvents(t, f); err != nil {
			return err
		}
	}
	r := t.LastResult
	wall := tboard.WallTime(r, t.LastResultTime)
	s.record = s.record[:0]
	for ; f.eventRows < t.NumResults-1; f.eventRows++ {
		s.record = tboard.AppendResult(s.record, wall, 0, nil)
	}
	s.record = tboard.AppendResult(s.record, wall, tboard.Step(r), tboard.Scalars(storage.Flatten(r)))
	if err := f.append(f.events, s.record); err != nil {
		return err
	}
	f.eventRows = t.NumResults
	return nil
}

// startEvents makes the trial's event file, named as Ray names it, holding
// its first record; written whole, so that it is found again (findEvents)
// after a kill.
func (s *staging) startEvents(t *state.Trial, f *trialFiles) error {
	created := t.StartTime
	if created.IsZero() {
		created = t.LastResultTime
	}
	name := tboard.FileName(created, s.host)
	start := tboard.AppendStart(nil, float64(created.UnixNano())/1e9)
	var err error
	if f.inPlace {
		err = s.direct.WriteAtomic(t.DirName+"/"+name, start)
	} else {
		err = os.WriteFile(filepath.Join(f.dir, name), start, 0o644)
	}
	if err != nil {
		return fmt.Errorf("start the event file of %s: %w", t.ID, err)
	}
	f.events = name
	return nil
}

// appendHParams writes the ended trial's hyperparameters (params, its
// evaluated params) to its event file, with its last result's scalars as
// the metrics, as Ray's logger does when a trial ends; at ended, when it
// ended. Without results or params there is nothing to write.
func (s *staging) appendHParams(ctx context.Context, t *state.Trial, params map[string]any, ended time.Time) error {
	if !s.tensorboard || t.NumResults == 0 || len(params) == 0 {
		return nil
	}
	f, err := s.filesOf(ctx, t, t.NumResults, t.NumFailures)
	if err != nil {
		return err
	}
	if f.events == "" {
		return nil
	}
	var metrics []string
	for _, sc := range tboard.Scalars(storage.Flatten(t.LastResult)) {
		metrics = append(metrics, sc.Tag)
	}
	s.record = tboard.AppendHParams(s.record[:0], float64(ended.UnixNano())/1e9, params, metrics)
	if err := f.append(f.events, s.record); err != nil {
		return err
	}
	s.written(t.ID, f)
	return nil
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
		names := storage.ResultFiles
		if f.events != "" {
			names = append(slices.Clip(names), f.events)
		}
		for _, name := range names {
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
