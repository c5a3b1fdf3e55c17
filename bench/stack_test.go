package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/session"
	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/services/controller"
	"github.com/tunejet/tunejet/services/restorer"
	"github.com/tunejet/tunejet/services/runner"
	"github.com/tunejet/tunejet/services/syncer"
	"github.com/tunejet/tunejet/tune"
)

// smoke reports whether the benchmarks run at their smallest scale
// (`go test -short -bench`): once each, to check that they complete and
// print their figures, which then mean nothing. make test runs them so.
func smoke() bool { return testing.Short() }

// envInt reads a positive integer from the environment; unset, it is def,
// or smallest under -short (smoke).
func envInt(b *testing.B, name string, def, smallest int) int {
	b.Helper()
	v := os.Getenv(name)
	if v == "" {
		if smoke() {
			return smallest
		}
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// envDuration reads a positive Go duration ("1s", "200ms") from the
// environment; unset, it is def, or smallest under -short (smoke).
func envDuration(b *testing.B, name string, def, smallest time.Duration) time.Duration {
	b.Helper()
	v := os.Getenv(name)
	if v == "" {
		if smoke() {
			return smallest
		}
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		b.Fatalf("%s=%q: want a positive Go duration such as 1s or 200ms", name, v)
	}
	return d
}

// startServer runs a fresh nats-server with JetStream on a free loopback
// port, its store in a new folder under the benchmark's temp dir, as
// bus.StartEmbedded configures it (the server's default limits, including
// its 1,000 consumers per stream). The caller shuts the server down.
func startServer(b *testing.B) *bus.Embedded {
	b.Helper()
	dir, err := os.MkdirTemp(b.TempDir(), "jetstream-")
	if err != nil {
		b.Fatal(err)
	}
	e, err := bus.StartEmbedded(bus.EmbedOptions{StoreDir: dir, Listen: true, Port: -1})
	if err != nil {
		b.Fatalf("start nats-server: %v", err)
	}
	return e
}

// logger passes the services' warnings and errors to the benchmark log.
func logger(b *testing.B) zerolog.Logger {
	return zerolog.New(zerolog.NewTestWriter(b)).Level(zerolog.WarnLevel)
}

// deployment is a real nats-server with the controller, one runner and the
// syncer (or a chosen set of services) running against it on their own
// connections, as separate services would (the shape of
// tune/harness_test.go).
type deployment struct {
	b      *testing.B
	emb    *bus.Embedded
	ownEmb bool // close shuts the server down
	conns  []*nats.Conn
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	errs   []error
	closed sync.Once

	// url and replicas, when set, point the deployment at a cluster
	// (cluster_test.go) instead of emb, with replicated streams.
	url      string
	replicas int
}

// startDeployment starts a fresh server, the controller, a runner and the
// syncer; the caller closes the deployment.
func startDeployment(b *testing.B, slots int, fns map[string]tune.Trainable) *deployment {
	b.Helper()
	d := &deployment{b: b, emb: startServer(b), ownEmb: true}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	d.start("controller", slots, fns)
	d.start("runner", slots, fns)
	d.start("syncer", slots, fns)
	return d
}

// onServer is a deployment on a running server, with no services yet
// (start adds them). close leaves the server running.
func onServer(b *testing.B, emb *bus.Embedded) *deployment {
	d := &deployment{b: b, emb: emb}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	return d
}

// start runs one service: "controller", "runner" (with slots and the Go
// trainables fns), "syncer" or "restorer".
func (d *deployment) start(service string, slots int, fns map[string]tune.Trainable) {
	d.b.Helper()
	var run func(context.Context) error
	switch service {
	case "controller":
		run = controller.New(d.bus(d.ctx, "controller"), controller.Config{}).Run
	case "runner":
		reg := map[string]session.Func{}
		for k, v := range fns {
			reg[k] = v
		}
		run = runner.New(d.bus(d.ctx, "runner"), runner.Config{Slots: slots, Trainables: reg, WorkDir: d.b.TempDir()}).Run
	case "syncer":
		run = syncer.New(d.bus(d.ctx, "syncer"), syncer.Config{}).Run
	case "restorer":
		run = restorer.New(d.bus(d.ctx, "restorer"), restorer.Config{}).Run
	default:
		d.b.Fatalf("unknown service %q", service)
	}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		if err := run(d.ctx); err != nil && !errors.Is(err, context.Canceled) {
			d.mu.Lock()
			d.errs = append(d.errs, fmt.Errorf("%s: %w", service, err))
			d.mu.Unlock()
		}
	}()
}

// conn opens another connection to the deployment's server, which close
// closes.
func (d *deployment) conn(name string) *nats.Conn {
	d.b.Helper()
	nc, err := nats.Connect(d.natsURL(), nats.Name(name))
	if err != nil {
		d.b.Fatalf("connect: %v", err)
	}
	d.conns = append(d.conns, nc)
	return nc
}

// bus opens a provisioned bus on a new connection.
func (d *deployment) bus(ctx context.Context, source string) *bus.Bus {
	d.b.Helper()
	bs, err := bus.New(d.conn("bench-"+source), "bench/"+source, logger(d.b))
	if err != nil {
		d.b.Fatal(err)
	}
	bs.Replicas = d.replicas
	if err := bs.Provision(ctx); err != nil {
		d.b.Fatal(err)
	}
	return bs
}

// log is the event log, provisioned as by a service, for reading raw on a
// connection of its own: the bus keeps its JetStream handle to itself.
func (d *deployment) log(ctx context.Context, source string) jetstream.Stream {
	d.b.Helper()
	d.bus(ctx, source)
	js, err := jetstream.New(d.conn("bench-" + source + "-raw"))
	if err != nil {
		d.b.Fatal(err)
	}
	s, err := js.Stream(ctx, bus.StreamName)
	if err != nil {
		d.b.Fatal(err)
	}
	return s
}

// close stops the services, then the server, and fails the benchmark if a
// service failed. Only the first call does anything.
func (d *deployment) close() {
	d.closed.Do(func() {
		d.cancel()
		d.wg.Wait()
		for _, nc := range d.conns {
			nc.Close()
		}
		if d.ownEmb {
			d.emb.Shutdown()
		}
		for _, err := range d.errs {
			d.b.Errorf("service: %v", err)
		}
	})
}

// fit runs an experiment on the deployment through the public API and
// returns its results and how long Fit took. A Fit that has not returned
// after limit is interrupted, and the benchmark fails with a summary of
// the experiment's log.
func (d *deployment) fit(limit time.Duration, trainable string, opts ...tune.Option) (*tune.ResultGrid, time.Duration) {
	d.b.Helper()
	g, took, err := d.tryFit(limit, trainable, opts...)
	if err != nil {
		d.close()
		d.b.Fatal(err)
	}
	return g, took
}

// tryFit is fit for any goroutine: it returns the error (after logging the
// experiment's log) instead of failing the benchmark.
func (d *deployment) tryFit(limit time.Duration, trainable string, opts ...tune.Option) (*tune.ResultGrid, time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	opts = append(opts, tune.WithNATS(tune.NATSOptions{URL: d.natsURL(), Name: "bench-client"}))
	tuner, err := tune.NewTuner(trainable, opts...)
	if err != nil {
		return nil, 0, err
	}
	spec, err := tuner.Spec()
	if err != nil {
		return nil, 0, err
	}
	start := time.Now()
	g, err := tuner.Fit(ctx)
	took := time.Since(start)
	if err != nil {
		d.diagnose(spec.Name)
		return nil, took, fmt.Errorf("Fit after %v: %w", took.Round(time.Millisecond), err)
	}
	return g, took, nil
}

// fitEmbedded runs an experiment the way a user's program does by default:
// tune.Fit with no NATS URL starts an in-process nats-server (store in the
// benchmark's temp dir) with the controller, a runner of slots and the
// syncer on one in-process connection, and stops them before it returns.
func fitEmbedded(b *testing.B, limit time.Duration, slots int, fn tune.Trainable, opts ...tune.Option) (*tune.ResultGrid, time.Duration) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	opts = append(opts, tune.WithStoreDir(b.TempDir()), tune.WithRunnerSlots(slots), tune.WithLogger(logger(b)))
	tuner, err := tune.NewTuner(fn, opts...)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	g, err := tuner.Fit(ctx)
	took := time.Since(start)
	if err != nil {
		b.Fatalf("Fit after %v: %v", took.Round(time.Millisecond), err)
	}
	return g, took
}

// diagnose logs what the experiment's log says: events by type, trials by
// status, and the last events.
func (d *deployment) diagnose(exp string) {
	d.b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	evs := d.events(ctx, exp)
	st := state.New(exp)
	types := map[string]int{}
	for _, ev := range evs {
		st, _, _ = state.Fold(context.Background(), st, ev, nil)
		types[ev.Type()]++
	}
	d.b.Logf("log of %s: %d events; by type %v", exp, len(evs), types)
	d.b.Logf("experiment %s; trials by status %v; %d in flight, %d unfinished", st.Status, st.Counts(), st.InFlight(), st.Unfinished())
	var failed []string
	for _, ev := range evs {
		if p, ok := ev.Data.(*events.TrialFailed); ok {
			failed = append(failed, p.Error)
		}
	}
	if len(failed) > 0 {
		d.b.Logf("%d trial.failed events; the last says: %s", len(failed), failed[len(failed)-1])
	}
	for _, ev := range evs[max(0, len(evs)-10):] {
		d.b.Logf("  seq %d %s %s %s", ev.Seq, ev.Time.Format(time.RFC3339Nano), ev.Type(), ev.Trial())
	}
}

// events returns every event of an experiment in log order. It reads the
// log message by message instead of through a consumer, so it works even
// when the stream cannot take another consumer.
func (d *deployment) events(ctx context.Context, exp string) []*events.Event {
	d.b.Helper()
	s := d.log(ctx, "reader")
	var out []*events.Event
	for seq := uint64(1); ; seq++ {
		m, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(events.ExperimentSubjects(exp)))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return out
		}
		if err != nil {
			d.b.Fatalf("read the log at %d: %v", seq, err)
		}
		seq = m.Sequence
		ev, err := events.Decode(m.Subject, m.Header, m.Data)
		if err != nil {
			d.b.Logf("seq %d: %v", seq, err)
			continue
		}
		ev.Seq = seq
		out = append(out, ev)
	}
}

// storedSpan returns the server timestamps of the first and the last
// message matching filter, and the last message itself.
func (d *deployment) storedSpan(ctx context.Context, filter string) (first, last time.Time, lastMsg *jetstream.RawStreamMsg) {
	d.b.Helper()
	s := d.log(ctx, "span")
	lastMsg, err := s.GetLastMsgForSubject(ctx, filter)
	if err != nil {
		d.b.Fatalf("last message on %s: %v", filter, err)
	}
	firstMsg, err := s.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(filter))
	if err != nil {
		d.b.Fatalf("first message on %s: %v", filter, err)
	}
	return firstMsg.Time, lastMsg.Time, lastMsg
}

// countStored is the number of messages the log holds on filter.
func (d *deployment) countStored(ctx context.Context, filter string) uint64 {
	d.b.Helper()
	s := d.log(ctx, "count")
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		d.b.Fatalf("stream info on %s: %v", filter, err)
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	return n
}

// spans records when each trainable's measured section began and ended.
type spans struct {
	mu         sync.Mutex
	start, end []time.Time
}

func (s *spans) add(start, end time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.start = append(s.start, start)
	s.end = append(s.end, end)
}

// bounds returns the earliest start, the latest end and how many spans
// were recorded.
func (s *spans) bounds() (first, last time.Time, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.start {
		if first.IsZero() || s.start[i].Before(first) {
			first = s.start[i]
		}
		if s.end[i].After(last) {
			last = s.end[i]
		}
	}
	return first, last, len(s.start)
}

// total is the sum of the spans' lengths.
func (s *spans) total() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var t time.Duration
	for i := range s.start {
		t += s.end[i].Sub(s.start[i])
	}
	return t
}

func sortTimes(ts []time.Time) {
	sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
}

// resultFiles counts the lines of every trial's result.json and returns
// the latest modification time among them.
func resultFiles(b *testing.B, g *tune.ResultGrid) (lines map[string]int, lastWrite time.Time) {
	b.Helper()
	lines = map[string]int{}
	for _, r := range g.Results() {
		p := filepath.Join(r.Path, "result.json")
		data, err := os.ReadFile(p)
		if err != nil {
			b.Errorf("trial %s: %v", r.TrialID, err)
			continue
		}
		n := 0
		for _, c := range data {
			if c == '\n' {
				n++
			}
		}
		lines[r.TrialID] = n
		if fi, err := os.Stat(p); err == nil && fi.ModTime().After(lastWrite) {
			lastWrite = fi.ModTime()
		}
	}
	return lines, lastWrite
}

func perSecond(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}
