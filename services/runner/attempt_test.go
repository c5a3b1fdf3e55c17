package runner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/session"
)

// TestAttempt runs one delivery of trial work on a runner of a real
// nats-server, from the work message to its settlement, and reads what
// the attempt wrote to the log.
func TestAttempt(t *testing.T) {
	steps := func(n int) session.Func {
		return func(ctx context.Context, _ map[string]any) error {
			s, err := session.From(ctx)
			if err != nil {
				return err
			}
			for i := 1; i <= n; i++ {
				if stop, err := s.Report(ctx, map[string]any{"step": i}, ""); stop || err != nil {
					return err
				}
			}
			return nil
		}
	}
	trainables := map[string]session.Func{
		"three": steps(3),
		"loop":  steps(1 << 30),
		"fail":  func(context.Context, map[string]any) error { return errors.New("fatal: out of cheese") },
	}
	tests := []struct {
		name      string
		work      events.TrialScheduled
		stopFirst bool // the controller asked to stop the trial before the work was delivered
		want      []string
	}{
		{
			name: "finishes",
			work: events.TrialScheduled{Trainable: events.Trainable{Name: "three"}},
			want: []string{"started(1)", "reported(1)", "reported(2)", "reported(3)", "completed(finished)"},
		},
		{
			name: "a stop criterion marks its result done and ends the trial",
			work: events.TrialScheduled{Trainable: events.Trainable{Name: "loop"}, Stop: map[string]float64{"step": 2}},
			want: []string{"started(1)", "reported(1)", "reported(2,done)", "completed(stop_criteria)"},
		},
		{
			name:      "stopped before it was delivered: started, then ended",
			work:      events.TrialScheduled{Trainable: events.Trainable{Name: "three"}},
			stopFirst: true,
			want:      []string{"started(1)", "completed(time_budget)"},
		},
		{
			name: "a failure with attempts left",
			work: events.TrialScheduled{Trainable: events.Trainable{Name: "fail"}, MaxFailures: 1},
			want: []string{"started(1)", "failed(Error,final=false: fatal: out of cheese)"},
		},
		{
			name: "the last failure",
			work: events.TrialScheduled{Trainable: events.Trainable{Name: "fail"}},
			want: []string{"started(1)", "failed(Error,final=true: fatal: out of cheese)"},
		},
		{
			name: "a trainable this runner does not have",
			work: events.TrialScheduled{Trainable: events.Trainable{Name: "missing"}},
			want: []string{"started(1)", `failed(Error,final=true: invalid trainable: "missing" is not registered on runner r1)`},
		},
		{
			name: "a command's failure carries its stderr",
			work: events.TrialScheduled{Trainable: events.Trainable{Command: []string{"/bin/sh", "-c", "echo 'fatal: out of cheese' >&2; exit 3"}}},
			want: []string{"started(1)", "failed(ExitError,final=true: trainable exited with status 3; last lines of stderr:\nfatal: out of cheese)"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := bustest.Start(t)
			s := New(srv.Bus("runner"), Config{Name: "r1", WorkDir: t.TempDir(), Trainables: trainables})
			work := tc.work
			work.TrialID, work.TrialName, work.DirName, work.HeartbeatTimeoutS = "t1", "train_t1", "train_t1", 30
			work.Config = map[string]any{"x": 1.0}
			var then []events.Payload
			if tc.stopFirst {
				then = append(then, &events.TrialStopRequested{TrialID: "t1", Reason: "time_budget"})
			}
			got, pending := runWork(t, srv.JetStream(), s, &work, then...)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("the attempt's events (-want +got):\n%s", diff)
			}
			if strings.HasPrefix(tc.want[len(tc.want)-1], "completed") && pending != 0 {
				t.Errorf("%d work messages wait for an ack after the trial completed", pending)
			}
		})
	}
}

func publish(t *testing.T, b *bus.Bus, w events.Writer, p events.Payload) {
	t.Helper()
	if _, err := b.Publish(t.Context(), b.Event("exp", w, p)); err != nil {
		t.Fatal(err)
	}
}

// runWork schedules work, then publishes the events then (each by its
// type's writer),
// runs the work's delivery on s to the end, and returns the runner's
// events about it and how many work messages wait for an ack (read on js).
func runWork(t *testing.T, js jetstream.JetStream, s *Service, work *events.TrialScheduled, then ...events.Payload) (got []string, ackPending int) {
	t.Helper()
	ctx := t.Context()
	if err := s.bus.EnsureWorkConsumer(ctx, "exp", bus.WorkConfig{MaxFailures: work.MaxFailures, AckWait: work.HeartbeatTimeoutS}); err != nil {
		t.Fatal(err)
	}
	publish(t, s.bus, events.WriterController, work)
	for _, p := range then {
		publish(t, s.bus, events.Writers(p.Type())[0], p)
	}
	msg := nextWork(t, s.bus)
	s.bus.Settle(ctx, msg, s.runAttempt(ctx, "exp", msg))
	err := s.bus.Replay(ctx, events.WriterSubjects("exp", events.WriterRunner), func(ev *events.Event) {
		got = append(got, describeEvent(ev)...)
	})
	if err != nil {
		t.Fatal(err)
	}
	cons, err := bustest.WorkConsumer(ctx, js, "exp")
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return got, info.NumAckPending
}

// describeEvent writes a runner event as "type(details)", one per result
// of a trial.reported (however the results were batched).
func describeEvent(ev *events.Event) []string {
	switch p := ev.Data.(type) {
	case *events.TrialStarted:
		return []string{fmt.Sprintf("started(%d)", p.Attempt)}
	case *events.TrialReported:
		var out []string
		for _, r := range append(p.Earlier, p.Result) {
			s := fmt.Sprint(r["training_iteration"])
			if r["done"] == true {
				s += ",done"
			}
			out = append(out, "reported("+s+")")
		}
		return out
	case *events.TrialCompleted:
		return []string{fmt.Sprintf("completed(%s)", p.Reason)}
	case *events.TrialFailed:
		return []string{fmt.Sprintf("failed(%s,final=%t: %s)", p.ErrorType, p.Final, p.Error)}
	}
	return []string{ev.Type()}
}

// An attempt that ends after a newer attempt of its trial has started
// (its work was redelivered while it still ran, and it had not noticed)
// must neither record its end nor settle the work: the fold ignores the
// end of a superseded attempt, and an ack would take the work from the
// newer attempt, so that, were its runner to die, the trial would never be
// redelivered and stay RUNNING for good.
func TestAnEndAfterANewerStartSettlesNothing(t *testing.T) {
	srv := bustest.Start(t)
	b := srv.Bus("runner")
	newer := &events.TrialStarted{TrialID: "t1", Attempt: 2, Runner: "r2", Hostname: "elsewhere", PID: 1}
	trainables := map[string]session.Func{
		"overtaken": func(ctx context.Context, _ map[string]any) error {
			// The newer attempt starts while this one finishes.
			_, err := b.Publish(ctx, b.Event("exp", events.WriterRunner, newer))
			return err
		},
	}
	s := New(b, Config{Name: "r1", WorkDir: t.TempDir(), Trainables: trainables})
	work := &events.TrialScheduled{TrialID: "t1", TrialName: "train_t1", DirName: "train_t1", HeartbeatTimeoutS: 30,
		Config: map[string]any{}, Trainable: events.Trainable{Name: "overtaken"}}
	got, pending := runWork(t, srv.JetStream(), s, work)
	if want := []string{"started(1)", "started(2)"}; !cmp.Equal(want, got) {
		t.Errorf("the runner events %v, want %v: the superseded attempt's end is not recorded", got, want)
	}
	if pending != 1 {
		t.Errorf("%d work messages wait for an ack, want 1: the newer attempt owns the work", pending)
	}
}

// Work scheduled before the experiment's newest restore is of a run that
// is over: the restored state decides which trials run again, and a
// runner that pulled that work (from the old run's consumer, before the
// restored run replaced it) must not start the trial on it.
func TestWorkFromBeforeARestoreIsNotRun(t *testing.T) {
	srv := bustest.Start(t)
	s := New(srv.Bus("runner"), Config{Name: "r1", WorkDir: t.TempDir(), Trainables: map[string]session.Func{
		"ok": func(context.Context, map[string]any) error { return nil },
	}})
	work := &events.TrialScheduled{TrialID: "t1", TrialName: "train_t1", DirName: "train_t1", HeartbeatTimeoutS: 30,
		Config: map[string]any{}, Trainable: events.Trainable{Name: "ok"}}
	restored := &events.ExperimentRestored{
		Resume: events.ResumeConfig{Finished: "skip", Unfinished: "resume", Errored: "skip"}, Source: "log",
		Object: "restored/state-1.json", Digest: "sha256:" + strings.Repeat("0", 64),
	}
	got, pending := runWork(t, srv.JetStream(), s, work, restored)
	if len(got) != 0 {
		t.Errorf("the runner wrote %v about work from before the restore, want nothing", got)
	}
	if pending != 0 {
		t.Errorf("%d work messages wait for an ack, want 0: stale work is settled", pending)
	}
}
