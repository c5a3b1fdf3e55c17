package syncer_test

import (
	"os"
	"path/filepath"
	"regexp"

	"github.com/google/go-cmp/cmp"

	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/tboard/tboardtest"
)

// trialDirNames lists the trial's folder, naming its TensorBoard event
// file "events.out.tfevents.*" once its name is checked to be Ray's:
// events.out.tfevents.<unix seconds>.<the syncer's host name>.
func (s *script) trialDirNames() []string {
	s.t.Helper()
	entries, err := os.ReadDir(filepath.Join(s.dir().Root, trialD))
	if err != nil {
		s.t.Fatal(err)
	}
	host, err := os.Hostname()
	if err != nil {
		s.t.Fatal(err)
	}
	ray := regexp.MustCompile(`^events\.out\.tfevents\.[0-9]+\.` + regexp.QuoteMeta(host) + `$`)
	var names []string
	for _, e := range entries {
		name := e.Name()
		if m, _ := filepath.Match("events.out.tfevents.*", name); m {
			if !ray.MatchString(name) {
				s.t.Errorf("event file %q: want events.out.tfevents.<unix seconds>.%s", name, host)
			}
			name = "events.out.tfevents.*"
		}
		names = append(names, name)
	}
	return names
}

// tensorBoard decodes the trial's one event file.
func (s *script) tensorBoard() []tboardtest.Event {
	s.t.Helper()
	files := tboardtest.Files(s.t, filepath.Join(s.dir().Root, trialD))
	if len(files) != 1 {
		s.t.Fatalf("the trial folder holds event files %v, want one", files)
	}
	return tboardtest.ReadFile(s.t, files[0])
}

// waitTensorBoard waits until the trial's event file holds n results.
func (s *script) waitTensorBoard(what string, n int) {
	s.t.Helper()
	bustest.Eventually(s.t, wait, what, func() bool {
		files := tboardtest.Files(s.t, filepath.Join(s.dir().Root, trialD))
		if len(files) != 1 {
			return false
		}
		data, err := os.ReadFile(files[0])
		if err != nil {
			return false
		}
		recs, err := tboardtest.Records(data)
		return err == nil && len(recs) == 1+n
	})
}

// checkTensorBoard checks the trial's event file: its start, then one
// event per result of its, in order, holding Ray's scalars of what
// script.report reports (training_iteration is the step, not a scalar),
// at the time the result was reported; then, if the trial ended, the
// hparams of its evaluated params (x, the space's one domain) and its
// last scalars.
func (s *script) checkTensorBoard(its []int, ended bool) {
	s.t.Helper()
	s.checkEvents(s.tensorBoard(), its, ended)
}

// checkEvents is checkTensorBoard on the decoded events of a trial's
// event file.
func (s *script) checkEvents(evs []tboardtest.Event, its []int, ended bool) {
	s.t.Helper()
	if len(evs) == 0 || evs[0].FileVersion != "brain.Event:2" {
		s.t.Fatalf("the event file does not start with its version: %+v", evs)
	}
	var steps []int
	var hparams []tboardtest.Value
	for i, ev := range evs[1:] {
		if len(ev.Values) > 0 && ev.Values[0].Plugin == "hparams" {
			hparams = append(hparams, ev.Values...)
			continue
		}
		if len(hparams) > 0 {
			s.t.Errorf("event %d: a result after the hparams", i+1)
		}
		steps = append(steps, int(ev.Step))
		it := float64(ev.Step)
		want := map[string]float32{"ray/tune/loss": float32(1 / it), "ray/tune/eval/acc": float32(it / 10), "ray/tune/done": 0}
		if diff := cmp.Diff(want, ev.Scalars()); diff != "" {
			s.t.Errorf("scalars at step %d (-want +got):\n%s", ev.Step, diff)
		}
		if at := s.reported[int(ev.Step)]; ev.WallTime != float64(at.Unix()) {
			s.t.Errorf("step %d at wall time %v, want %v, when the script reported it", ev.Step, ev.WallTime, at.Unix())
		}
	}
	if !cmp.Equal(steps, its) {
		s.t.Errorf("event file steps %v, want %v: each result once, in order", steps, its)
	}
	if !ended {
		if len(hparams) != 0 {
			s.t.Errorf("hparams before the trial ended: %+v", hparams)
		}
		return
	}
	if len(hparams) != 3 {
		s.t.Fatalf("%d hparams summaries at the end, want 3 (experiment, session start and end)", len(hparams))
	}
	if !cmp.Equal(hparams[0].HParamTypes, map[string]string{"x": "DATA_TYPE_FLOAT64"}) ||
		!cmp.Equal(hparams[0].Metrics, []string{"ray/tune/done", "ray/tune/eval/acc", "ray/tune/loss"}) {
		s.t.Errorf("hparams experiment %+v", hparams[0])
	}
	if !cmp.Equal(hparams[1].HParams, map[string]any{"x": 1.0}) || hparams[2].Status != "STATUS_SUCCESS" {
		s.t.Errorf("hparams session %+v, %+v", hparams[1], hparams[2])
	}
}
