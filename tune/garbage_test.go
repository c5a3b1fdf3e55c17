package tune_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/api"
	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/ckpt"
	"github.com/tunejet/tunejet/internal/session"
	"github.com/tunejet/tunejet/services/controller"
	"github.com/tunejet/tunejet/services/restorer"
	"github.com/tunejet/tunejet/services/runner"
	"github.com/tunejet/tunejet/services/syncer"
	"github.com/tunejet/tunejet/tune"
)

// capture keeps every log line a service writes, as parsed JSON.
type capture struct {
	mu    sync.Mutex
	lines []map[string]any
}

func (c *capture) Write(p []byte) (int, error) {
	var line map[string]any
	if err := json.Unmarshal(p, &line); err != nil {
		line = map[string]any{"message": string(p)}
	}
	c.mu.Lock()
	c.lines = append(c.lines, line)
	c.mu.Unlock()
	return len(p), nil
}

func (c *capture) all() []map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]map[string]any(nil), c.lines...)
}

// startLoggedDeployment is startDeployment with every service's log kept,
// at debug level, in logs by service name.
func startLoggedDeployment(t *testing.T, slots int, fns map[string]tune.Trainable) (*deployment, map[string]*capture) {
	t.Helper()
	srv := bustest.Start(t)
	d := &deployment{srv: srv, bus: srv.Bus("test")}
	logs := map[string]*capture{}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for name, c := range logs { // what the services warned of, to tell why
			for _, l := range c.all() {
				if l["level"] == "warn" || l["level"] == "error" {
					t.Logf("%s: %v", name, l)
				}
			}
		}
	})
	busOf := func(name string) *bus.Bus {
		c := &capture{}
		logs[name] = c
		b, err := bus.New(srv.Conn(), name, zerolog.New(c).Level(zerolog.DebugLevel))
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Provision(t.Context()); err != nil {
			t.Fatal(err)
		}
		return b
	}
	reg := map[string]session.Func{}
	for k, v := range fns {
		reg[k] = v
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	run := func(name string, f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%s panicked: %v", name, p)
				}
			}()
			err := f(ctx)
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("%s: %v", name, err)
			}
			if ctx.Err() == nil {
				t.Errorf("%s returned while the deployment runs", name)
			}
		}()
	}
	run("controller", controller.New(busOf("controller"), controller.Config{}).Run)
	run("runner", runner.New(busOf("runner"), runner.Config{Slots: slots, Trainables: reg, WorkDir: t.TempDir()}).Run)
	// Retries wait 20 ms, not Ray's 5 s: a lie's failed upload is retried.
	run("syncer", syncer.New(busOf("syncer"), syncer.Config{RetryBackoff: 20 * time.Millisecond}).Run)
	run("restorer", restorer.New(busOf("restorer"), restorer.Config{}).Run)
	t.Cleanup(func() { cancel(); wg.Wait() })
	return d, logs
}

// reached is what a liar trial tells the test once it has reported its
// second iteration (with checkpoint_000001) on its first attempt.
type reached struct {
	trial, role string
	attempt     int
}

// liarTrainable reports n iterations with a checkpoint each, resuming from
// its checkpoint. On its first attempt, after iteration 2, it tells the
// test and waits for release; trials whose "role" is not "steady" then
// crash, so that their retry resumes from a checkpoint.
func liarTrainable(n int, at chan<- reached, release <-chan struct{}) tune.Trainable {
	return func(ctx context.Context, config map[string]any) error {
		info, err := tune.GetTrialInfo(ctx)
		if err != nil {
			return err
		}
		role, _ := config["role"].(string)
		step := 0
		if dir, _ := tune.GetCheckpoint(ctx); dir != "" {
			b, err := os.ReadFile(filepath.Join(dir, "state.json"))
			if err != nil {
				return err
			}
			if err := json.Unmarshal(b, &step); err != nil {
				return err
			}
		}
		for step < n {
			step++
			dir, err := os.MkdirTemp("", "ckpt")
			if err != nil {
				return err
			}
			b, _ := json.Marshal(step)
			if err := os.WriteFile(filepath.Join(dir, "state.json"), b, 0o644); err != nil {
				return err
			}
			if err := tune.Report(ctx, map[string]any{"step": step}, tune.WithCheckpoint(dir)); err != nil {
				return err
			}
			os.RemoveAll(dir)
			if step != 2 || info.Attempt != 1 {
				continue
			}
			select {
			case at <- reached{trial: info.TrialID, role: role, attempt: info.Attempt}:
			case <-ctx.Done():
				return ctx.Err()
			}
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
			if role != "steady" {
				return fmt.Errorf("simulated crash after step %d of a trial lied about", step)
			}
		}
		return nil
	}
}

// garbage is one message the test put on the bus.
type garbage struct {
	name    string
	subject string
	seq     uint64 // in the stream that captured it
	lie     bool   // well-formed: it decodes, and the fold ignores it
}

// garbageBus publishes garbage and remembers it.
type garbageBus struct {
	t    *testing.T
	b    *bus.Bus            // builds the events garbage is made of
	js   jetstream.JetStream // stores the garbage, as is
	exp  string
	sent []garbage
}

// raw stores a message as is, with a fresh Nats-Msg-Id.
func (g *garbageBus) raw(name, subject string, h nats.Header, data []byte) uint64 {
	g.t.Helper()
	hdr := nats.Header{}
	for k, v := range h {
		hdr[k] = append([]string(nil), v...)
	}
	hdr.Set(events.HeaderMsgID, events.NewID())
	ack, err := g.js.PublishMsg(g.t.Context(), &nats.Msg{Subject: subject, Header: hdr, Data: data})
	if err != nil {
		g.t.Fatalf("publish %s on %s: %v", name, subject, err)
	}
	g.sent = append(g.sent, garbage{name: name, subject: subject, seq: ack.Sequence})
	return ack.Sequence
}

// lie stores a well-formed event on its own subject.
func (g *garbageBus) lie(name string, w events.Writer, p events.Payload) uint64 {
	g.t.Helper()
	msg, err := bus.ToNATS(g.b.Event(g.exp, w, p))
	if err != nil {
		g.t.Fatalf("encode %s: %v", name, err)
	}
	seq := g.raw(name, msg.Subject, msg.Header, msg.Data)
	g.sent[len(g.sent)-1].lie = true
	return seq
}

// forged stores an event by w that edit makes invalid: decoding refuses
// it, so every reader logs and skips it.
func (g *garbageBus) forged(name string, w events.Writer, p events.Payload, edit func(map[string]any)) uint64 {
	g.t.Helper()
	msg, err := bus.ToNATS(g.b.Event(g.exp, w, p))
	if err != nil {
		g.t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(msg.Data, &m); err != nil {
		g.t.Fatal(err)
	}
	edit(m)
	data, err := json.Marshal(m)
	if err != nil {
		g.t.Fatal(err)
	}
	return g.raw(name, msg.Subject, msg.Header, data)
}

// envelope is the headers and data of a valid event by w.
func (g *garbageBus) envelope(w events.Writer, p events.Payload) (nats.Header, []byte) {
	g.t.Helper()
	msg, err := bus.ToNATS(g.b.Event(g.exp, w, p))
	if err != nil {
		g.t.Fatal(err)
	}
	return msg.Header, msg.Data
}

// ceHeader is a binary-mode CloudEvents header set of type typ.
func (g *garbageBus) ceHeader(typ, subject string) nats.Header {
	h := nats.Header{}
	h.Set("ce-specversion", "1.0")
	h.Set("ce-id", events.NewID())
	h.Set("ce-source", "tunejet/garbage")
	h.Set("ce-type", typ)
	h.Set("ce-subject", subject)
	h.Set("ce-time", time.Now().UTC().Format(time.RFC3339Nano))
	h.Set("ce-datacontenttype", "application/json")
	h.Set("ce-experiment", g.exp)
	return h
}

// malformed publishes every kind of garbage on subject, whose events are
// of type typ: bytes that are no CloudEvent, an envelope without a type
// and one with an unknown type, invalid JSON data, another type's payload
// (other, written by w) under typ and under its own type, and a message
// just under the server's maximum payload.
func (g *garbageBus) malformed(subject, typ string, w events.Writer, other events.Payload) {
	g.t.Helper()
	h := g.ceHeader(typ, g.exp)
	noType := g.ceHeader(typ, g.exp)
	noType.Del("ce-type")
	unknown := g.ceHeader("io.tunejet.trial.exploded", g.exp)
	oh, odata := g.envelope(w, other)
	pad := g.b.MaxPayload() - 4096
	big := append(append([]byte(`{"files":-1,"trial_id":5,"pad":"`), bytes.Repeat([]byte("x"), int(pad))...), `"}`...)
	for _, m := range []struct {
		name string
		h    nats.Header
		data []byte
	}{
		{"bytes that are no CloudEvent", nil, []byte("\x00\xffnot an event")},
		{"an envelope without ce-type", noType, []byte(`{}`)},
		{"an envelope with an unknown ce-type", unknown, []byte(`{}`)},
		{"an envelope with invalid JSON data", h, []byte(`{"trial_id":`)},
		{"an array for data", h, []byte(`["not", "an", "object"]`)},
		{"another type's payload", h, odata},
		{"another type's envelope", oh, odata},
		{"an oversized message", h, big},
	} {
		if _, err := events.Decode(subject, m.h, m.data); err == nil {
			if m.name == "another type's payload" {
				continue // it is an event of this type too
			}
			g.t.Fatalf("%s on %s decodes", m.name, subject)
		}
		g.raw(m.name, subject, m.h, m.data)
	}
}

// TestGarbageOnTheBus publishes malformed, oversized, wrongly typed and
// well-formed but lying messages on every subject a service reads while
// an experiment runs: no service stops, each message is logged and
// skipped, and the experiment completes as if there had been none.
func TestGarbageOnTheBus(t *testing.T) { runGarbage(t, true, false) }

// TestGarbageCheckpointLies has runner events of a trial's current attempt
// lie about its checkpoints before the attempt fails: ones naming another
// checkpoint's object (refused on decoding), and a newer checkpoint whose
// own object holds other bytes or does not exist. The retry resumes from
// the last true checkpoint, and storage never holds a lie as the trial's
// latest checkpoint.
func TestGarbageCheckpointLies(t *testing.T) { runGarbage(t, false, true) }

// runGarbage runs three trials that report 4 iterations with a checkpoint
// each; two of them crash once after iteration 2. While all three wait
// at iteration 2, it publishes garbage (malformed) and lies about their
// checkpoints (checkpointLies), then checks the outcome.
func runGarbage(t *testing.T, malformed, checkpointLies bool) {
	const exp, iterations = "garbage", 4
	at, release := make(chan reached), make(chan struct{})
	d, logs := startLoggedDeployment(t, 3, map[string]tune.Trainable{"liar": liarTrainable(iterations, at, release)})
	rc := storage(t)
	rc.FailureConfig.MaxFailures = 1
	// The lies are about staged copies in the Object Store.
	rc.CheckpointConfig.Route = events.RouteObjectStore
	tuner, err := tune.NewTuner("liar", tune.WithName(exp), tune.WithRunConfig(rc), d.nats(),
		tune.WithParamSpace(tune.ParamSpace{"role": tune.GridSearch("steady", "digest", "missing")}))
	if err != nil {
		t.Fatal(err)
	}
	type fitResult struct {
		g   *tune.ResultGrid
		err error
	}
	done := make(chan fitResult, 1)
	go func() {
		g, err := tuner.Fit(t.Context())
		done <- fitResult{g, err}
	}()
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()

	trials := map[string]reached{} // by role
	for len(trials) < 3 {
		select {
		case r := <-at:
			trials[r.role] = r
		case f := <-done:
			t.Fatalf("Fit returned before every trial reached iteration 2: %v", f.err)
		case <-time.After(2 * time.Minute):
			t.Fatalf("only %d trials reached iteration 2", len(trials))
		}
	}
	// Each trial's checkpoint_000001 (of iteration 2, its last) is in the
	// log before anything lies about it.
	firsts := map[string]events.CheckpointRef{}
	bustest.Eventually(t, time.Minute, "checkpoint_000001 of every trial in the log", func() bool {
		for _, ev := range d.events(t, exp) {
			if p, ok := ev.Data.(*events.TrialCheckpointed); ok && p.Checkpoint.Index == 1 {
				firsts[p.TrialID] = p.Checkpoint
			}
		}
		return len(firsts) == 3
	})
	steady, digest, missing := trials["steady"], trials["digest"], trials["missing"]
	g := &garbageBus{t: t, b: d.srv.Bus("garbage"), js: d.srv.JetStream(), exp: exp}

	if malformed {
		// Malformed messages on every subject a service reads.
		report := &events.TrialReported{TrialID: steady.trial, Attempt: 1, Result: map[string]any{"training_iteration": 3}}
		stop := &events.TrialStopRequested{TrialID: steady.trial, Reason: "lies"}
		lies := &events.ExperimentStopRequested{Reason: "lies"}
		interrupted := &events.ExperimentInterrupted{Reason: "lies"}
		for _, m := range []struct {
			subject, typ string
			w            events.Writer
			other        events.Payload
		}{
			{events.Subject(exp, events.WriterClient, events.TypeExperimentSubmitted, ""), events.TypeExperimentSubmitted, events.WriterClient, lies},
			{events.Subject(exp, events.WriterRestorer, events.TypeExperimentRestored, ""), events.TypeExperimentRestored, events.WriterClient, lies},
			{events.Subject(exp, events.WriterController, events.TypeExperimentStarted, ""), events.TypeExperimentStarted, events.WriterController, interrupted},
			{events.Subject(exp, events.WriterController, events.TypeExperimentCompleted, ""), events.TypeExperimentCompleted, events.WriterController, interrupted},
			{events.Subject(exp, events.WriterController, events.TypeTrialScheduled, steady.trial), events.TypeTrialScheduled, events.WriterController, stop},
			{events.Subject(exp, events.WriterController, events.TypeTrialStopRequested, steady.trial), events.TypeTrialStopRequested, events.WriterController,
				&events.TrialCompleted{TrialID: steady.trial, Status: events.StatusError, Reason: "lies"}},
			{events.Subject(exp, events.WriterRunner, events.TypeTrialStarted, steady.trial), events.TypeTrialStarted, events.WriterRunner, report},
			{events.Subject(exp, events.WriterRunner, events.TypeTrialReported, steady.trial), events.TypeTrialReported, events.WriterController, stop},
			{events.Subject(exp, events.WriterRunner, events.TypeTrialCheckpointed, steady.trial), events.TypeTrialCheckpointed, events.WriterRunner, report},
			{events.Subject(exp, events.WriterRunner, events.TypeTrialFailed, steady.trial), events.TypeTrialFailed, events.WriterRunner, report},
			{events.Subject(exp, events.WriterRunner, events.TypeTrialCompleted, steady.trial), events.TypeTrialCompleted, events.WriterRunner, report},
			{events.Subject(exp, events.WriterSyncer, events.TypeCheckpointPersisted, steady.trial), events.TypeCheckpointPersisted, events.WriterRunner, report},
			{events.Subject(exp, events.WriterSyncer, events.TypeSyncCompleted, ""), events.TypeSyncCompleted, events.WriterSyncer,
				&events.SyncFailed{Operation: "lies", Error: "lies"}},
		} {
			g.malformed(m.subject, m.typ, m.w, m.other)
		}

		// Events from a writer the type does not allow (a client may ask
		// to stop a trial: its own trial.stop_requested is no lie).
		for _, w := range []events.Writer{events.WriterRunner, events.WriterSyncer, events.WriterClient} {
			if w != events.WriterClient {
				h, data := g.envelope(events.WriterController, stop)
				g.raw("trial.stop_requested from writer "+string(w), events.Subject(exp, w, events.TypeTrialStopRequested, steady.trial), h, data)
			}
			h, data := g.envelope(events.WriterController, &events.ExperimentCompleted{Reason: "lies"})
			g.raw("experiment.completed from writer "+string(w), events.Subject(exp, w, events.TypeExperimentCompleted, ""), h, data)
		}
	}

	// Well-formed lies.
	g.lie("a report of a trial that does not exist", events.WriterRunner,
		&events.TrialReported{TrialID: "nosuch_00000", Attempt: 1, Result: map[string]any{"training_iteration": 1}})
	g.lie("a report from a future attempt", events.WriterRunner,
		&events.TrialReported{TrialID: steady.trial, Attempt: 99, Result: map[string]any{"training_iteration": 3, "step": -1}})
	future := firsts[steady.trial]
	future.Name, future.Index = ckpt.Name(7), 7
	future.Object = ckpt.AttemptObjectName(steady.trial, 99, future.Name)
	g.lie("a checkpoint from a future attempt", events.WriterRunner,
		&events.TrialCheckpointed{TrialID: steady.trial, Attempt: 99, Checkpoint: future})
	g.lie("a completion from a future attempt", events.WriterRunner,
		&events.TrialCompleted{TrialID: steady.trial, Attempt: 99, Status: events.StatusError, Reason: "lies"})
	if checkpointLies {
		// Lies decoding refuses: a checkpoint naming another one's object.
		sum := sha256.Sum256([]byte("not these bytes"))
		for _, r := range []reached{digest, missing} {
			lie := firsts[r.trial]
			lie.Name, lie.Index, lie.Iteration, lie.Metrics = ckpt.Name(2), 2, 3, nil
			lie.Object = ckpt.AttemptObjectName(r.trial, r.attempt, ckpt.Name(2))
			g.forged("a checkpoint naming another checkpoint's object", events.WriterRunner,
				&events.TrialCheckpointed{TrialID: r.trial, Attempt: r.attempt, Checkpoint: lie},
				func(m map[string]any) { m["checkpoint"].(map[string]any)["object"] = firsts[r.trial].Object })
		}

		// Well-formed lies the fold takes: checkpoint_000002 of the
		// current attempt, whose own object holds other bytes than the
		// event names, or is not there.
		other := t.TempDir()
		if err := os.WriteFile(filepath.Join(other, "state.json"), []byte("3"), 0o644); err != nil {
			t.Fatal(err)
		}
		obs, err := d.bus.Checkpoints(t.Context(), exp)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ckpt.Stage(t.Context(), obs, ckpt.AttemptObjectName(digest.trial, digest.attempt, ckpt.Name(2)), other); err != nil {
			t.Fatal(err)
		}
		for _, r := range []reached{digest, missing} {
			lie := firsts[r.trial]
			lie.Name, lie.Index, lie.Iteration, lie.Metrics = ckpt.Name(2), 2, 3, nil
			lie.Object, lie.Digest = ckpt.AttemptObjectName(r.trial, r.attempt, lie.Name), "sha256:"+hex.EncodeToString(sum[:])
			g.lie("a newer checkpoint whose own object is not its bytes", events.WriterRunner,
				&events.TrialCheckpointed{TrialID: r.trial, Attempt: r.attempt, Checkpoint: lie})
		}
	}

	submitted, err := d.bus.LastSeq(t.Context(), events.TypeSubjects(exp, events.WriterClient, events.TypeExperimentSubmitted))
	if err != nil {
		t.Fatal(err)
	}
	if malformed {
		// Garbage among the max-deliveries advisories the controller reads.
		advisory := "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + bus.StreamName + "." + bus.WorkConsumerName(exp)
		g.raw("an advisory that is no JSON", advisory, nil, []byte("\x00\xffnot an advisory"))
		g.raw("an advisory without a sequence", advisory, nil, []byte(`{"stream_seq":0}`))
		g.raw("an advisory naming no message", advisory, nil, []byte(`{"stream_seq":999999999,"deliveries":2}`))
		g.raw("an advisory naming an event that is not trial work", advisory, nil, []byte(fmt.Sprintf(`{"stream_seq":%d,"deliveries":2}`, submitted)))

		// Garbage requests to the restorer: each gets an error reply, with
		// a code.
		nc := d.srv.Conn()
		for _, subject := range []string{api.RestoreSubject, api.CanRestoreSubject} {
			for _, body := range []string{"", "\x00\xff", `{"path":`, `{"path":5}`, `[]`, `{}`, `{"path":"../../etc"}`} {
				m, err := nc.RequestWithContext(t.Context(), subject, []byte(body))
				if err != nil {
					t.Errorf("request %q on %s: %v", body, subject, err)
					continue
				}
				var rep api.RestoreReply
				if m.Header.Get("Nats-Service-Error") == "" && (json.Unmarshal(m.Data, &rep) != nil || rep.OK || rep.Code == "") {
					t.Errorf("request %q on %s: reply %q %v, want an error with a code", body, subject, m.Data, m.Header)
				}
			}
		}
	}

	released = true
	close(release)
	var f fitResult
	select {
	case f = <-done:
	case <-time.After(3 * time.Minute):
		t.Fatal("the experiment did not complete")
	}
	if f.err != nil {
		t.Fatalf("Fit: %v", f.err)
	}
	checkGarbageOutcome(t, d, f.g, exp, iterations, []string{digest.trial, missing.trial})
	if m, err := d.bus.RawEvent(t.Context(), submitted); err != nil || m.Subject != events.TypeSubjects(exp, events.WriterClient, events.TypeExperimentSubmitted) {
		t.Errorf("experiment.submitted (seq %d) is no longer in the log: %v", submitted, err)
	}
	checkGarbageLogged(t, logs, g.sent)
}

// checkGarbageOutcome checks that every trial ended TERMINATED at its last
// iteration with every result once in storage, and that no trial resumed
// from, nor storage holds as latest, a checkpoint lied about.
func checkGarbageOutcome(t *testing.T, d *deployment, g *tune.ResultGrid, exp string, iterations int, liedAbout []string) {
	t.Helper()
	if g.Len() != 3 {
		t.Fatalf("%d trials, want 3", g.Len())
	}
	for _, r := range g.Results() {
		if r.Status != events.StatusTerminated || r.Metrics["training_iteration"] != float64(iterations) {
			t.Errorf("trial %s (%v) ended %s at iteration %v (%v); want TERMINATED at %d", r.TrialID, r.Config["role"], r.Status, r.Metrics["training_iteration"], r.Error, iterations)
		}
		data, err := os.ReadFile(filepath.Join(r.Path, "result.json"))
		if err != nil {
			t.Errorf("trial %s: %v", r.TrialID, err)
			continue
		}
		rows := resultRows(t, data)
		var its []any
		for _, row := range rows {
			its = append(its, row["training_iteration"])
		}
		if len(rows) != iterations {
			t.Errorf("trial %s: result.json iterations %v, want 1..%d", r.TrialID, its, iterations)
			continue
		}
		for i, row := range rows {
			if row["training_iteration"] != float64(i+1) || row["step"] != float64(i+1) {
				t.Errorf("trial %s: result.json row %d is %v, want iteration and step %d", r.TrialID, i+1, row, i+1)
			}
		}
	}
	stored, err := tune.LoadResults(t.Context(), g.ExperimentPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range stored.Results() {
		if r.Checkpoint == nil || r.Checkpoint.Name != ckpt.Name(iterations-1) {
			t.Errorf("trial %s: storage holds %v as its latest checkpoint", r.TrialID, r.Checkpoint)
		}
	}
	for _, ev := range d.events(t, exp) {
		if p, ok := ev.Data.(*events.TrialStarted); ok && p.Attempt > 1 && contains(liedAbout, p.TrialID) && p.RestoredFrom != ckpt.Name(1) {
			t.Errorf("trial %s: attempt %d resumed from %q, want the last true checkpoint %s", p.TrialID, p.Attempt, p.RestoredFrom, ckpt.Name(1))
		}
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// checkGarbageLogged checks that some service logged each malformed
// message that reached the event log, and that no service logged one over
// and over.
func checkGarbageLogged(t *testing.T, logs map[string]*capture, sent []garbage) {
	t.Helper()
	logged := map[uint64]bool{}
	for name, c := range logs {
		counts := map[string]int{}
		for _, l := range c.all() {
			if seq, ok := l["seq"].(float64); ok {
				logged[uint64(seq)] = true
				counts[fmt.Sprint(l["message"], " seq ", seq)]++
			}
		}
		for k, n := range counts {
			// The controller follows every experiment's submissions and
			// the experiment's own events: two watches see those.
			if n > 2 {
				t.Errorf("%s logged %q %d times", name, k, n)
			}
		}
	}
	for _, g := range sent {
		if !g.lie && strings.HasPrefix(g.subject, events.Prefix+".") && !logged[g.seq] {
			t.Errorf("%s on %s (seq %d) was not logged", g.name, g.subject, g.seq)
		}
	}
}
