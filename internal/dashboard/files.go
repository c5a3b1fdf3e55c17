package dashboard

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"gocloud.dev/blob"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/ckpt"
	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/internal/storage"
)

// maxErrorText bounds the error.txt the page is sent.
const maxErrorText = 1 << 20

// TrialDetail is what the page shows of one trial: its row, its timeline,
// its error.txt and its checkpoints.
type TrialDetail struct {
	Trial TrialRow `json:"trial"`
	// Path is the trial's directory in storage.
	Path string `json:"path,omitempty"`
	// Timeline is the trial's story, oldest first; TimelineSource is "log"
	// or "state file" (which keeps decisions without their inputs, and
	// failures only counted).
	Timeline       []Entry `json:"timeline"`
	TimelineSource string  `json:"timeline_source"`
	// ErrorText is the trial's error.txt; ErrorNote says why it is not
	// there when the trial failed.
	ErrorText   string           `json:"error_text,omitempty"`
	ErrorNote   string           `json:"error_note,omitempty"`
	Checkpoints []CheckpointInfo `json:"checkpoints"`
}

// CheckpointInfo is one of a trial's kept checkpoints.
type CheckpointInfo struct {
	Name      string `json:"name"`
	Iteration int    `json:"iteration"`
	Size      int64  `json:"size"`
	// Persisted: the syncer stored it under the trial's directory.
	// Staged: a copy is in the experiment's Object Store.
	Persisted bool `json:"persisted"`
	Staged    bool `json:"staged"`
	// Download is the URL of a tar of the checkpoint's folder.
	Download string `json:"download"`
}

// getTrial answers GET /api/experiments/{name}/trials/{trial}.
func (s *Server) getTrial(w http.ResponseWriter, r *http.Request) {
	l := s.lookup(w, r)
	if l == nil {
		return
	}
	l.mu.Lock()
	t := l.st.Trials[r.PathValue("trial")]
	if t == nil {
		l.mu.Unlock()
		httpError(w, http.StatusNotFound, fmt.Sprintf("no trial %q in experiment %s", r.PathValue("trial"), l.name))
		return
	}
	d := TrialDetail{Trial: l.row(t), Timeline: l.trialTimeline(t), TimelineSource: "log", Checkpoints: []CheckpointInfo{}}
	if l.fromFiles {
		d.TimelineSource = "state file"
	}
	if l.expPath != "" {
		d.Path = storage.Join(l.expPath, t.DirName)
	}
	base := "/api/experiments/" + l.name + "/trials/" + t.ID + "/checkpoints/"
	for _, c := range t.Checkpoints {
		d.Checkpoints = append(d.Checkpoints, CheckpointInfo{
			Name: c.Name, Iteration: c.Iteration, Size: c.Size, Persisted: l.fromFiles || t.Persisted[c.Name] || c.Location != "",
			Staged: c.Object != "" && !l.fromFiles, Download: base + c.Name,
		})
	}
	failed, dir, expPath := t.NumFailures > 0 || t.Status == events.StatusError, t.DirName, l.expPath
	l.mu.Unlock()

	if failed {
		text, err := s.readTrialFile(r.Context(), expPath, dir, storage.ErrorFile)
		switch {
		case err == nil:
			d.ErrorText = string(text)
		case l.fromFiles:
			d.ErrorNote = fmt.Sprintf("no %s: %v", storage.ErrorFile, err)
		default:
			d.ErrorNote = fmt.Sprintf("%s is not readable from this dashboard (%v); the failures in the timeline come from the log", storage.ErrorFile, err)
		}
	}
	writeJSON(w, d)
}

// readTrialFile reads a file of a trial's directory, at most
// maxErrorText bytes of it.
func (s *Server) readTrialFile(ctx context.Context, expPath, dir, name string) ([]byte, error) {
	if expPath == "" {
		return nil, errors.New("the experiment has no storage path yet")
	}
	rel := dir + "/" + name
	if local, err := storage.LocalPath(expPath); err == nil {
		root, err := os.OpenRoot(local)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", local, err)
		}
		defer root.Close()
		f, err := root.Open(filepath.FromSlash(rel))
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", rel, err)
		}
		defer f.Close()
		data, err := io.ReadAll(io.LimitReader(f, maxErrorText))
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", rel, err)
		}
		return data, nil
	}
	b, err := storage.OpenBucket(ctx, expPath)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	rd, err := b.NewReader(ctx, rel, nil)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", rel, err)
	}
	defer rd.Close()
	data, err := io.ReadAll(io.LimitReader(rd, maxErrorText))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", rel, err)
	}
	return data, nil
}

// downloadCheckpoint answers GET
// /api/experiments/{name}/trials/{trial}/checkpoints/{checkpoint} with a
// tar of the checkpoint's folder: from storage when the runner wrote it
// there or the syncer persisted it there and this server sees the
// storage, else the copy staged in the experiment's Object Store. Only a checkpoint the experiment's state
// names is served: any other name, "..", an encoded slash or an absolute
// path is a 404. In a local directory the folder is read through an
// os.Root of the experiment directory, which refuses paths and symlinks
// that leave it; symlinks in the folder are left out of the tar.
func (s *Server) downloadCheckpoint(w http.ResponseWriter, r *http.Request) {
	l := s.lookup(w, r)
	if l == nil {
		return
	}
	trial, name := r.PathValue("trial"), r.PathValue("checkpoint")
	l.mu.Lock()
	t := l.st.Trials[trial]
	var ref *events.CheckpointRef
	if t != nil {
		for i, c := range t.Checkpoints {
			if c.Name == name {
				ref = &t.Checkpoints[i]
			}
		}
	}
	if ref == nil {
		l.mu.Unlock()
		httpError(w, http.StatusNotFound, fmt.Sprintf("trial %q of experiment %s has no checkpoint %q", trial, l.name, name))
		return
	}
	c, persisted, dir, expPath := *ref, l.fromFiles || t.Persisted[name] || ref.Location != "", t.DirName, l.expPath
	l.mu.Unlock()
	folder := dir + "/" + c.Name
	if c.Location != "" {
		folder = c.Location // written straight to storage by the runner
	}

	file := fmt.Sprintf("%s_%s_%s.tar", l.name, trial, c.Name)
	var storageErr error
	if persisted && expPath != "" {
		storageErr = s.tarFromStorage(r.Context(), w, file, expPath, folder)
		if storageErr == nil || errors.Is(storageErr, errSent) {
			return
		}
	} else {
		storageErr = errors.New("the syncer has not persisted it to storage")
	}
	if c.Object == "" || s.b == nil {
		httpError(w, http.StatusNotFound, fmt.Sprintf("checkpoint %s cannot be downloaded: %v, and no copy is staged in the Object Store", c.Name, storageErr))
		return
	}
	obs, err := s.b.Checkpoints(r.Context(), l.name)
	if err != nil {
		httpError(w, http.StatusNotFound, fmt.Sprintf("checkpoint %s cannot be downloaded: %v; the Object Store: %v", c.Name, storageErr, err))
		return
	}
	obj, err := ckpt.Open(r.Context(), obs, c.Object)
	if err != nil {
		httpError(w, http.StatusNotFound, fmt.Sprintf("checkpoint %s cannot be downloaded: %v; its staged copy %s: %v", c.Name, storageErr, c.Object, err))
		return
	}
	defer obj.Close()
	attachment(w, file)
	if _, err := io.Copy(w, obj); err != nil {
		s.cfg.Log.Warn().Err(err).Str("object", c.Object).Msg("dashboard: checkpoint download cut short")
	}
}

// errSent marks a download that failed after its first bytes were sent.
var errSent = errors.New("the response was under way")

func attachment(w http.ResponseWriter, file string) {
	w.Header().Set("Content-Type", "application/x-tar")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", file))
	w.WriteHeader(http.StatusOK)
}

// tarFromStorage streams the folder rel of the experiment directory as a
// tar. Before anything is sent it returns the reason it cannot; after,
// an error wrapping errSent.
func (s *Server) tarFromStorage(ctx context.Context, w http.ResponseWriter, file, expPath, rel string) error {
	if local, err := storage.LocalPath(expPath); err == nil {
		return tarLocal(w, file, local, rel)
	}
	b, err := storage.OpenBucket(ctx, expPath)
	if err != nil {
		return err
	}
	defer b.Close()
	return tarBucket(ctx, w, file, b, rel+"/")
}

func tarLocal(w http.ResponseWriter, file, expDir, rel string) error {
	root, err := os.OpenRoot(expDir)
	if err != nil {
		return fmt.Errorf("open %s: %w", expDir, err)
	}
	defer root.Close()
	sub, err := root.OpenRoot(filepath.FromSlash(rel))
	if err != nil {
		return fmt.Errorf("open %s in %s: %w", rel, expDir, err)
	}
	defer sub.Close()
	fsys := sub.FS()
	attachment(w, file)
	tw := tar.NewWriter(w)
	err = fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == "." {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: p + "/", Mode: 0o755, ModTime: info.ModTime()})
		case !info.Mode().IsRegular():
			return nil // symlinks and the like stay out
		}
		f, err := fsys.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: p, Mode: 0o644, Size: info.Size(), ModTime: info.ModTime()}); err != nil {
			return err
		}
		_, err = io.CopyN(tw, f, info.Size())
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if err != nil {
		return fmt.Errorf("%w: %w", errSent, err)
	}
	return nil
}

func tarBucket(ctx context.Context, w http.ResponseWriter, file string, b *blob.Bucket, prefix string) error {
	var keys []*blob.ListObject
	for obj, err := range storage.Objects(ctx, b, &blob.ListOptions{Prefix: prefix}) {
		if err != nil {
			return fmt.Errorf("list %s: %w", prefix, err)
		}
		keys = append(keys, obj)
	}
	if len(keys) == 0 {
		return fmt.Errorf("no files under %s: %w", prefix, fs.ErrNotExist)
	}
	attachment(w, file)
	tw := tar.NewWriter(w)
	for _, obj := range keys {
		name := strings.TrimPrefix(obj.Key, prefix)
		if obj.IsDir || name == "" || !fs.ValidPath(name) || path.IsAbs(name) {
			continue
		}
		if err := copyObject(ctx, tw, b, obj, name); err != nil {
			return fmt.Errorf("%w: %w", errSent, err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("%w: %w", errSent, err)
	}
	return nil
}

func copyObject(ctx context.Context, tw *tar.Writer, b *blob.Bucket, obj *blob.ListObject, name string) error {
	rd, err := b.NewReader(ctx, obj.Key, nil)
	if err != nil {
		return err
	}
	defer rd.Close()
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: rd.Size(), ModTime: rd.ModTime()}); err != nil {
		return err
	}
	_, err = io.CopyN(tw, rd, rd.Size())
	return err
}

// listRunners answers GET /api/runners: the live runners of the registry,
// each as the runner publishes itself (the reply subjects of its work
// left out).
func (s *Server) listRunners(w http.ResponseWriter, r *http.Request) {
	out := runnerList{Runners: []map[string]any{}}
	if s.b == nil {
		out.Note = "This dashboard reads an experiment's files: it sees no runners."
		writeJSON(w, out)
		return
	}
	infos, ok, err := s.b.LiveRunners(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if !ok {
		out.Note = "No runner has registered with this deployment yet."
		writeJSON(w, out)
		return
	}
	for _, info := range infos {
		data, err := json.Marshal(info)
		if err == nil {
			var m map[string]any
			if m, err = runnerEntry(data); err == nil {
				out.Runners = append(out.Runners, m)
				continue
			}
		}
		s.fail(w, r, err)
		return
	}
	writeJSON(w, out)
}

// info answers GET /api/info: what the page may offer.
func (s *Server) info(w http.ResponseWriter, _ *http.Request) {
	source := "log"
	if s.b == nil {
		source = "files"
	}
	writeJSON(w, map[string]any{"source": source, "allow_actions": s.cfg.AllowActions && s.b != nil})
}

// actions guards the POST endpoints: 403 unless the server allows
// actions, and for a request another site's page sends (the browser's
// Sec-Fetch-Site or Origin says so).
func (s *Server) actions(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.cfg.AllowActions {
			httpError(w, http.StatusForbidden, "actions are off: start the dashboard with --allow-actions to stop experiments from the page")
			return
		}
		if err := cop.Check(r); err != nil {
			httpError(w, http.StatusForbidden, "refused a cross-origin request: "+err.Error())
			return
		}
		next.ServeHTTP(w, r)
	})
}

// stopExperiment answers POST /api/experiments/{name}/stop: it asks the
// controller to stop the experiment, as tunejet stop does (a client's
// experiment.stop_requested on the log).
func (s *Server) stopExperiment(w http.ResponseWriter, r *http.Request) {
	l := s.lookupLive(w, r)
	if l == nil {
		return
	}
	l.mu.Lock()
	status := l.st.Status
	l.mu.Unlock()
	if status == state.ExperimentCompleted || status == state.ExperimentInterrupted {
		httpError(w, http.StatusConflict, fmt.Sprintf("experiment %s is %s already", l.name, status))
		return
	}
	s.requestStop(w, r, l.name, "the experiment", &events.ExperimentStopRequested{Reason: "stopped from the dashboard"})
}

// stopTrial asks the controller to stop one trial, as `tunejet stop NAME
// --trial ID` does: a client's trial.stop_requested.
func (s *Server) stopTrial(w http.ResponseWriter, r *http.Request) {
	l := s.lookupLive(w, r)
	if l == nil {
		return
	}
	id := r.PathValue("trial")
	l.mu.Lock()
	t := l.st.Trials[id]
	finished := t != nil && t.Finished()
	l.mu.Unlock()
	switch {
	case t == nil:
		httpError(w, http.StatusNotFound, fmt.Sprintf("experiment %s has no trial %q", l.name, id))
		return
	case finished:
		httpError(w, http.StatusConflict, fmt.Sprintf("trial %s has ended already", id))
		return
	}
	s.requestStop(w, r, l.name, "trial "+id, &events.TrialStopRequested{TrialID: id, Reason: "stopped from the dashboard"})
}

// lookupLive is lookup for an action on a running experiment: a dashboard
// on files alone has nothing running to act on.
func (s *Server) lookupLive(w http.ResponseWriter, r *http.Request) *live {
	if s.b == nil {
		httpError(w, http.StatusConflict, "this dashboard reads an experiment's files: there is nothing running to stop")
		return nil
	}
	return s.lookup(w, r)
}

// requestStop publishes a client's stop request p about experiment exp,
// as tunejet stop does, and answers 202; what names its object ("the
// experiment", "trial ID") in the log and in an error.
func (s *Server) requestStop(w http.ResponseWriter, r *http.Request, exp, what string, p events.Payload) {
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	if _, err := s.b.Publish(ctx, s.b.Event(exp, events.WriterClient, p)); err != nil {
		s.fail(w, r, fmt.Errorf("ask to stop %s of %s: %w", what, exp, err))
		return
	}
	s.cfg.Log.Info().Str("experiment", exp).Str("what", what).Str("remote", r.RemoteAddr).Msg("dashboard: asked to stop")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	_ = json.NewEncoder(w).Encode(map[string]string{"status": "stop requested"})
}
