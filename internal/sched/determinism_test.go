package sched

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// equateFloats compares Floats bit for bit, so that NaN equals NaN and
// -0 differs from 0.
var equateFloats = cmp.Comparer(func(a, b Float) bool {
	return math.Float64bits(float64(a)) == math.Float64bits(float64(b))
})

type status int

const (
	pending status = iota
	running
	paused
	ended
)

type simTrial struct {
	id      string
	status  status
	t       float64
	quality float64
	last    Result
	config  map[string]any
	ckpt    int
	// resumable: the driver may restart a paused trial on its own (not
	// for a trial HyperBand paused: only its Resume decision does).
	resumable bool
}

// driver plays a controller with 3 slots against a scheduler: it adds
// trials, feeds results of running trials in a random order, acts on the
// decisions and ends some trials on its own. Its own draws come from its
// own generator; the scheduler's from a generator seeded per call, as a
// controller seeds them from (seed, kind, ordinal).
type driver struct {
	t         *testing.T
	sched     Scheduler
	fresh     func() Scheduler
	roundTrip bool
	phase     int // with roundTrip, restore before the steps i with i%restoreEvery == phase
	rng       *rand.Rand
	trials    []*simTrial
	byID      map[string]*simTrial
	ordinal   uint64
	restores  int
	log       bytes.Buffer
	step      func(r *rand.Rand) float64
}

const slots = 3

func (d *driver) decide(ds []Decision) {
	for _, dec := range ds {
		b, err := json.Marshal(dec)
		if err != nil {
			d.t.Fatalf("marshal decision: %v", err)
		}
		d.log.Write(b)
		d.log.WriteByte('\n')
		tr := d.byID[dec.Trial]
		switch dec.Action {
		case Stop:
			wasRunning := tr.status == running
			tr.status = ended
			if wasRunning {
				d.decide(d.sched.Complete(tr.last))
			} else {
				d.decide(d.sched.Remove(tr.id))
			}
		case Pause:
			tr.status, tr.resumable = paused, !isHyperBand(d.sched)
		case Resume:
			tr.status = pending
		case Exploit:
			tr.status, tr.resumable, tr.config = paused, true, dec.Exploit.NewConfig
		}
	}
}

func isHyperBand(s Scheduler) bool { _, ok := s.(*HyperBand); return ok }

func (d *driver) rand() *rand.Rand {
	d.ordinal++
	return rand.New(rand.NewPCG(42, d.ordinal))
}

func (d *driver) waiting() bool {
	for _, tr := range d.trials {
		if tr.status == pending || tr.status == paused {
			return true
		}
	}
	return false
}

// fill starts pending trials, then resumable paused ones, while slots are
// free.
func (d *driver) fill() {
	n := 0
	for _, tr := range d.trials {
		if tr.status == running {
			n++
		}
	}
	for _, want := range []status{pending, paused} {
		for _, tr := range d.trials {
			if n < slots && tr.status == want && (want == pending || tr.resumable) {
				tr.status = running
				d.sched.Resumed(tr.id)
				n++
			}
		}
	}
}

func (d *driver) add() {
	id := fmt.Sprintf("t%03d", len(d.trials))
	tr := &simTrial{id: id, quality: d.rng.Float64(), config: map[string]any{
		"lr": d.rng.Float64(), "layers": 1 + d.rng.IntN(8), "opt": map[string]any{"name": "adam"},
	}}
	d.trials = append(d.trials, tr)
	d.byID[id] = tr
	d.decide([]Decision{d.sched.Add(id, d.rand())})
}

func (d *driver) ctx() Context {
	return Context{
		Waiting: d.waiting(),
		Config:  func(id string) map[string]any { return d.byID[id].config },
		Rand:    d.rand(),
	}
}

// restore replaces the scheduler with a fresh one restored from its state
// and checks that the state survived the JSON round trip unchanged: its
// bytes every time, its fields (which cmp compares slowly) every 25th.
func (d *driver) restore() {
	b, err := json.Marshal(d.sched)
	if err != nil {
		d.t.Fatalf("marshal state: %v", err)
	}
	next := d.fresh()
	if err := json.Unmarshal(b, next); err != nil {
		d.t.Fatalf("unmarshal state: %v\n%s", err, b)
	}
	again, err := json.Marshal(next)
	if err != nil || !bytes.Equal(b, again) {
		d.t.Fatalf("state changed in a round trip (%v):\n%s\n%s", err, b, again)
	}
	d.restores++
	if d.restores%25 != 0 {
		d.sched = next
		return
	}
	if diff := cmp.Diff(schedState(d.sched), schedState(next), equateFloats, cmpopts.IgnoreUnexported(ashaRung{})); diff != "" {
		d.t.Fatalf("state not equal after a round trip (-before +after):\n%s", diff)
	}
	d.sched = next
}

func schedState(s Scheduler) any {
	switch x := s.(type) {
	case *ASHA:
		return x.st
	case *HyperBand:
		return x.st
	case *Median:
		return x.st
	case *PBT:
		return x.st
	}
	return nil
}

// restoreEvery spaces a driver's restores: the 4 seeds of TestDeterminism
// restore at the 4 phases, so that together they restore before every step
// index, at a quarter of the cost of each restoring before every step.
const restoreEvery = 4

func (d *driver) run(steps, maxTrials int) {
	for i := range steps {
		if d.roundTrip && i%restoreEvery == d.phase {
			d.restore()
		}
		if len(d.trials) < maxTrials && (d.rng.IntN(4) == 0 || !d.waiting()) {
			d.add()
		}
		d.fill()
		var run []*simTrial
		for _, tr := range d.trials {
			if tr.status == running {
				run = append(run, tr)
			}
		}
		if len(run) == 0 {
			if len(d.trials) >= maxTrials {
				return
			}
			continue
		}
		tr := run[d.rng.IntN(len(run))]
		d.report(tr)
	}
}

func (d *driver) report(tr *simTrial) {
	tr.t += d.step(d.rng)
	m := tr.quality*math.Log1p(tr.t) + 0.1*d.rng.NormFloat64()
	if d.rng.IntN(50) == 0 {
		m = math.NaN()
	}
	res := Result{Trial: tr.id, Metrics: map[string]float64{"t": tr.t, "m": m}}
	if d.rng.IntN(3) == 0 {
		tr.ckpt++
		res.Checkpoint = fmt.Sprintf("%s/checkpoint_%06d", tr.id, tr.ckpt)
	}
	tr.last = res
	d.decide(d.sched.Result(res, d.ctx()))
	if tr.status != running {
		return
	}
	switch d.rng.IntN(40) {
	case 0: // finishes on its own
		tr.status = ended
		d.decide(d.sched.Complete(res))
	case 1: // errors
		tr.status = ended
		d.decide(d.sched.Remove(tr.id))
	}
}

// TestDeterminism runs each scheduler through a random history twice: once
// uninterrupted, once restored from its JSON state into a fresh instance
// before every fourth step (each seed at another phase of four). The decisions must be the same, byte for byte.
func TestDeterminism(t *testing.T) {
	mutations := map[string]Mutation{
		"lr":     {Sample: func(r *rand.Rand) any { return r.Float64() }},
		"layers": {Sample: func(r *rand.Rand) any { return 1 + r.IntN(8) }},
		"opt":    {Nested: map[string]Mutation{"name": {Choices: []any{"sgd", "adam", "rmsprop"}}}},
	}
	obj := Objective{Metric: "m", Mode: Max}
	intStep := func(*rand.Rand) float64 { return 1 }
	floatStep := func(r *rand.Rand) float64 { return 0.5 + r.Float64() }
	tests := []struct {
		name string
		new  func() (Scheduler, error)
		step func(*rand.Rand) float64
		// acts are actions the history must contain to test anything.
		acts []Action
	}{
		{"fifo", func() (Scheduler, error) { return NewFIFO(), nil }, intStep, nil},
		{"asha", func() (Scheduler, error) {
			c := DefaultASHAConfig()
			c.Objective, c.TimeAttr, c.MaxT, c.ReductionFactor = obj, "t", 27, 3
			return NewASHA(c)
		}, intStep, []Action{Stop, Record}},
		{"asha brackets 3 min", func() (Scheduler, error) {
			c := DefaultASHAConfig()
			c.Objective, c.TimeAttr, c.MaxT, c.ReductionFactor, c.Brackets = Objective{Metric: "m", Mode: Min}, "t", 27, 3, 3
			return NewASHA(c)
		}, floatStep, []Action{Stop}},
		{"hyperband", func() (Scheduler, error) {
			c := DefaultHyperBandConfig()
			c.Objective, c.TimeAttr, c.MaxT = obj, "t", 9
			return NewHyperBand(c)
		}, intStep, []Action{Pause, Resume, Stop}},
		{"median", func() (Scheduler, error) {
			c := DefaultMedianConfig()
			c.Objective, c.TimeAttr, c.GracePeriod, c.MinTimeSlice = obj, "t", 2, 1
			return NewMedianStoppingRule(c)
		}, floatStep, []Action{Stop, Pause}},
		{"median soft", func() (Scheduler, error) {
			c := DefaultMedianConfig()
			c.Objective, c.TimeAttr, c.GracePeriod, c.HardStop = Objective{Metric: "m", Mode: Min}, "t", 2, false
			return NewMedianStoppingRule(c)
		}, floatStep, []Action{Pause}},
		{"pbt", func() (Scheduler, error) {
			c := DefaultPBTConfig()
			c.Objective, c.TimeAttr, c.PerturbationInterval, c.BurnInPeriod = obj, "t", 3, 2
			c.HyperparamMutations = mutations
			return NewPBT(c)
		}, floatStep, []Action{Exploit, Pause}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fresh := func() Scheduler {
				s, err := tt.new()
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			var all strings.Builder
			for seed := range uint64(4) {
				logs := make([]string, 2)
				for i, roundTrip := range []bool{false, true} {
					d := &driver{t: t, sched: fresh(), fresh: fresh, roundTrip: roundTrip, phase: int(seed % restoreEvery),
						rng: rand.New(rand.NewPCG(seed, 99)), byID: map[string]*simTrial{}, step: tt.step}
					d.run(400, 40)
					logs[i] = d.log.String()
				}
				if logs[0] != logs[1] {
					t.Fatalf("seed %d: decisions differ after restores:\n%s", seed, firstDiff(logs[0], logs[1]))
				}
				all.WriteString(logs[0])
			}
			for _, act := range tt.acts {
				if !strings.Contains(all.String(), fmt.Sprintf(`"action":%q`, act)) {
					t.Errorf("no %s decision in the histories: they test too little", act)
				}
			}
		})
	}
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			return fmt.Sprintf("line %d:\n%s\n%s", i, al[i], bl[i])
		}
	}
	return fmt.Sprintf("lengths %d and %d", len(al), len(bl))
}
