package syncer

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/internal/storage"
)

// writer keeps one experiment's storage in step with its events.
type writer struct {
	s   *Service
	exp string
	log zerolog.Logger
	st  *state.Experiment
	dir *storage.Dir
	evs chan *events.Event

	onDisk map[string]*trialFiles
	dirty  bool // the state changed since the last snapshot
}

// trialFiles is what a trial's files hold, read once from disk.
type trialFiles struct {
	rows      int      // lines in result.json
	failures  int      // entries in error.txt
	csvHeader []string // progress.csv columns
}

func newWriter(s *Service, exp string) *writer {
	return &writer{
		s: s, exp: exp, st: state.New(exp), evs: make(chan *events.Event, 1024),
		onDisk: map[string]*trialFiles{}, log: s.log.With().Str("experiment", exp).Logger(),
	}
}

func (w *writer) run(ctx context.Context) error {
	// The watch outlives ctx a little: on shutdown the writer first catches
	// up with what is already in the log.
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	watchErr := make(chan error, 1)
	go func() {
		watchErr <- w.s.bus.Watch(wctx, events.ExperimentSubjects(w.exp), 0, bus.Handler{
			Event: func(ev *events.Event) {
				select {
				case w.evs <- ev:
				case <-wctx.Done():
				}
			},
		})
	}()
	tick := time.NewTicker(w.s.cfg.Period)
	defer tick.Stop()
	for {
		select {
		case ev := <-w.evs:
			w.apply(ev)
			if w.st.Done() {
				w.drain()
				w.snapshot()
				return nil
			}
		case <-tick.C:
			w.snapshot()
		case err := <-watchErr:
			w.snapshot()
			return err
		case <-ctx.Done():
			w.catchUp()
			w.snapshot()
			return ctx.Err()
		}
	}
}

// catchUpTimeout bounds the final catch-up on shutdown.
const catchUpTimeout = 5 * time.Second

// catchUp folds and writes every event already in the log, so a shutdown
// loses nothing that was published before it.
func (w *writer) catchUp() {
	ctx, cancel := context.WithTimeout(context.Background(), catchUpTimeout)
	defer cancel()
	target, err := w.s.bus.LastSeq(ctx, events.ExperimentSubjects(w.exp))
	if err != nil {
		w.log.Warn().Err(err).Msg("final catch-up")
	}
	for w.st.LastSeq < target {
		select {
		case ev := <-w.evs:
			w.apply(ev)
		case <-ctx.Done():
			w.log.Warn().Uint64("at", w.st.LastSeq).Uint64("target", target).Msg("final catch-up timed out")
			return
		}
	}
	w.drain()
}

func (w *writer) drain() {
	for {
		select {
		case ev := <-w.evs:
			w.apply(ev)
		default:
			return
		}
	}
}

// apply folds an event and writes what it adds.
func (w *writer) apply(ev *events.Event) {
	if !w.st.Apply(ev) {
		return
	}
	w.dirty = true
	var err error
	switch p := ev.Data.(type) {
	case *events.ExperimentStarted:
		err = w.start()
	case *events.TrialCreated:
		err = w.params(p)
	case *events.TrialReported:
		err = w.result(p.TrialID)
	}
	if id := ev.Trial(); id != "" && err == nil {
		err = w.failures(ev, id)
	}
	if err != nil {
		w.log.Error().Err(err).Str("event", ev.Type()).Msg("write to storage")
	}
}

func (w *writer) start() error {
	dir, err := storage.Open(w.st.StoragePath, w.exp)
	if err != nil {
		return err
	}
	w.dir = dir
	return dir.WriteAtomic(storage.MarkerFile, nil)
}

func (w *writer) params(p *events.TrialCreated) error {
	if w.dir == nil {
		return nil
	}
	b, err := json.MarshalIndent(p.Config, "", "  ")
	if err != nil {
		return fmt.Errorf("params.json of %s: %w", p.TrialID, err)
	}
	return w.dir.WriteAtomic(p.DirName+"/params.json", append(b, '\n'))
}

// files returns what the trial's files already hold.
func (w *writer) files(t *state.Trial) *trialFiles {
	if f := w.onDisk[t.ID]; f != nil {
		return f
	}
	f := &trialFiles{}
	if b, err := w.dir.Read(t.DirName + "/result.json"); err == nil {
		f.rows = bytes.Count(b, []byte("\n"))
	}
	if b, err := w.dir.Read(t.DirName + "/error.txt"); err == nil {
		f.failures = bytes.Count(b, []byte("Failure # "))
	}
	if b, err := w.dir.Read(t.DirName + "/progress.csv"); err == nil {
		if rec, err := csv.NewReader(bytes.NewReader(b)).Read(); err == nil {
			f.csvHeader = rec
		}
	}
	w.onDisk[t.ID] = f
	return f
}

// result appends the trial's newest result to result.json and progress.csv,
// unless the files already hold it.
func (w *writer) result(id string) error {
	t := w.st.Trials[id]
	if w.dir == nil || t == nil {
		return nil
	}
	f := w.files(t)
	if t.NumResults <= f.rows {
		return nil
	}
	row := maps.Clone(t.LastResult)
	row["config"] = t.Config
	line, err := json.Marshal(row)
	if err != nil {
		return fmt.Errorf("result of %s: %w", id, err)
	}
	if err := w.dir.Append(t.DirName+"/result.json", append(line, '\n')); err != nil {
		return err
	}
	f.rows = t.NumResults
	return w.progress(t, f)
}

// progress appends a CSV row; the columns are the first result's
// (flattened, without config), as Ray's CSV logger does.
func (w *writer) progress(t *state.Trial, f *trialFiles) error {
	flat := flatten(t.LastResult)
	var buf bytes.Buffer
	cw := csv.NewWriter(&buf)
	if f.csvHeader == nil {
		f.csvHeader = slices.Sorted(maps.Keys(flat))
		_ = cw.Write(f.csvHeader)
	}
	rec := make([]string, len(f.csvHeader))
	for i, k := range f.csvHeader {
		if v, ok := flat[k]; ok {
			rec[i] = csvValue(v)
		}
	}
	_ = cw.Write(rec)
	cw.Flush()
	return w.dir.Append(t.DirName+"/progress.csv", buf.Bytes())
}

// failures appends Ray's "Failure # N" entry when the trial's counted
// failures grew: a failed attempt, or an attempt lost with its runner.
func (w *writer) failures(ev *events.Event, id string) error {
	t := w.st.Trials[id]
	if w.dir == nil || t == nil || t.NumFailures == 0 {
		return nil
	}
	f := w.files(t)
	if t.NumFailures <= f.failures {
		return nil
	}
	entry := fmt.Sprintf("Failure # %d (occurred at %s)\n%s\n", t.NumFailures, ev.Time.Local().Format("2006-01-02_15-04-05"), t.LastError)
	if err := w.dir.Append(t.DirName+"/error.txt", []byte(entry)); err != nil {
		return err
	}
	f.failures = t.NumFailures
	return nil
}

// snapshot writes experiment_state-<session>.json if the state changed.
func (w *writer) snapshot() {
	if w.dir == nil || !w.dirty || w.st.Session == "" {
		return
	}
	start := time.Now()
	name := storage.StateFileName(w.st.Session)
	b, err := w.st.Snapshot()
	if err == nil {
		err = w.dir.WriteAtomic(name, b)
	}
	if err != nil {
		w.log.Error().Err(err).Msg("write experiment state")
		return
	}
	w.dirty = false
	w.announce(&events.SyncCompleted{Seq: w.st.LastSeq, Snapshot: name, Files: 1, Bytes: int64(len(b)), DurationS: time.Since(start).Seconds()})
}

// announce tells the log what storage now reflects. Its own sync events
// leave the state clean, so announcing never triggers another snapshot.
func (w *writer) announce(p *events.SyncCompleted) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := w.s.bus.Publish(ctx, w.s.bus.Event(w.exp, events.WriterSyncer, p)); err != nil {
		w.log.Warn().Err(err).Msg("announce sync")
	}
}

func flatten(m map[string]any) map[string]any {
	out := map[string]any{}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			if sub, ok := v.(map[string]any); ok {
				walk(prefix+k+"/", sub)
				continue
			}
			out[prefix+k] = v
		}
	}
	walk("", m)
	return out
}

func csvValue(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return ""
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return strings.Trim(string(b), `"`)
}
