package dashboard

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/internal/storage"
)

// NewStorage returns a server of the experiment whose directory in
// storage is path (<storage_path>/<name>, a local path or a storage URL:
// what tunejet results takes), read from its files alone: the newest
// experiment_state-*.json, as tunejet results reads it, and each trial's
// result.json for its curve. Nothing follows it afterwards: the page shows
// the experiment as the files had it when the server started.
func NewStorage(ctx context.Context, path string, cfg Config) (*Server, error) {
	p, err := storage.Resolve(path, "")
	if err != nil {
		return nil, err
	}
	if local, err := storage.LocalPath(p); err == nil {
		// OpenBucket creates a missing directory: say it is missing instead.
		if _, err := os.Stat(local); err != nil {
			return nil, fmt.Errorf("experiment directory %s: %w", p, err)
		}
	}
	b, err := storage.OpenBucket(ctx, p)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	st, key, skipped, err := storage.LoadNewestState(ctx, b)
	for _, sk := range skipped {
		cfg.Log.Warn().Str("path", p).Str("skipped", sk.Key).Str("reason", sk.Err.Error()).Str("snapshot", key).
			Msg("skipped a damaged state file; showing an older one")
	}
	switch {
	case errors.Is(err, state.ErrCorrupt):
		return nil, fmt.Errorf("%s: %w", storage.Join(p, key), err)
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("no experiment snapshot file of form 'experiment_state-*.json' was found at %s; check that the path is the combination of storage_path and name of your run: %w", p, err)
	case err != nil:
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	l := newLive(st.Name)
	l.st, l.fromFiles, l.expPath = st, true, p
	if st.Spec != nil {
		l.metric = st.Spec.TuneConfig.Primary().Metric
	}
	for _, t := range st.TrialList() {
		data, err := storage.ReadAll(ctx, b, t.DirName+"/"+storage.ResultFile)
		if errors.Is(err, fs.ErrNotExist) {
			continue // a trial that never reported
		}
		if err != nil {
			return nil, fmt.Errorf("trial %s: %w", t.ID, err)
		}
		if err := l.addResultLines(t.ID, data); err != nil {
			return nil, fmt.Errorf("%s: %w", storage.Join(p, t.DirName, storage.ResultFile), err)
		}
	}
	if l.metric == "" {
		// No metric in the spec: the first reported, as on the log.
		for _, t := range st.TrialList() {
			if l.metric = firstMetric(t.LastResult); l.metric != "" {
				break
			}
		}
	}
	close(l.caught)
	return &Server{cfg: cfg, ctx: ctx, stored: l}, nil
}

// addResultLines adds a result.json's results to the trial's curve; a
// last line cut short (a copy taken while it was written) is left out.
func (l *live) addResultLines(trial string, data []byte) error {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal(line, &r); err != nil {
			if !bytes.HasSuffix(data, []byte("\n")) && !sc.Scan() {
				return nil // the last line, incomplete
			}
			return fmt.Errorf("a line is not JSON: %w", err)
		}
		l.addPoint(trial, r)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read: %w", err)
	}
	return nil
}
