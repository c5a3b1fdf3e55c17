package sched

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"github.com/tunejet/tunejet/internal/search"
)

// The PBT study's problem is the noisy quadratic model: SGD with learning
// rate lr on f(w) = w²/2, whose gradient w + ξ carries noise of variance
// σ², moves the expected squared distance to the optimum, L = E[w²], as
//
//	L' = (1-lr)² L + lr² σ²
//
// per step. The best learning rate for the next step is L / (L + σ²)
// (Schaul, Zhang and LeCun 2013, "No More Pesky Learning Rates", §2): near
// 1 while L is large, then shrinking as L does, about 1/(s+1) after s
// steps. No fixed learning rate is good throughout: a large one stalls at
// its noise floor lr σ² / (2 - lr), a small one converges slowly. Since L'
// grows with L, taking the best rate at every step is the best schedule,
// so the optimum after n steps is known: 1/L_n = 1/L_0 + n/σ².
//
// The state is deterministic (the expected loss, not one noisy run), so a
// trial's checkpoint is its loss and iteration, and only the initial
// configs and PBT's draws differ between seeds. examples/pbt/train.py is
// the same problem.
const (
	nqmL0       = 1.0  // L at iteration 0
	nqmNoise    = 0.01 // σ²
	nqmSteps    = 10   // SGD steps per iteration (one result)
	nqmT        = 40   // iterations per trial
	nqmPop      = 8    // PBT's population; random search's configs
	nqmInterval = 2    // PBT's perturbation_interval in iterations
	nqmLRLow    = 1e-3 // lr is loguniform in [nqmLRLow, nqmLRHigh]
	nqmLRHigh   = 1.0
)

// nqmTrain runs one iteration (nqmSteps SGD steps) at lr from loss.
func nqmTrain(loss, lr float64) float64 {
	for range nqmSteps {
		loss = (1-lr)*(1-lr)*loss + lr*lr*nqmNoise
	}
	return loss
}

// nqmFixed is the loss after nqmT iterations at a fixed lr.
func nqmFixed(lr float64) float64 {
	loss := nqmL0
	for range nqmT {
		loss = nqmTrain(loss, lr)
	}
	return loss
}

// nqmOptimum is the loss after nqmT iterations of the best schedule.
func nqmOptimum() float64 { return 1 / (1/nqmL0 + nqmT*nqmSteps/nqmNoise) }

// nqmGrid is the best fixed lr on a log grid of 2001 points and its loss.
func nqmGrid() (lr, loss float64) {
	loss = math.Inf(1)
	for i := range 2001 {
		x := nqmLRLow * math.Pow(nqmLRHigh/nqmLRLow, float64(i)/2000)
		if l := nqmFixed(x); l < loss {
			lr, loss = x, l
		}
	}
	return lr, loss
}

// sampleLR is lr's distribution: PBT's mutation and the configs' space.
func sampleLR(r *rand.Rand) any {
	return nqmLRLow * math.Pow(nqmLRHigh/nqmLRLow, r.Float64())
}

// nqmTrial is one member of the simulated population.
type nqmTrial struct {
	id     string
	config map[string]any
	loss   float64
	iter   int
	done   bool
}

// nqmCheckpoint is what a trial saves each iteration.
type nqmCheckpoint struct {
	loss float64
	iter int
}

// pbtNQM is the outcome of one simulated PBT run.
type pbtNQM struct {
	best     float64 // the lowest final loss in the population
	steps    int     // SGD steps spent, repeated ones included
	exploits int
}

// pbtRun trains one trial per initial lr with PBT (minimising loss,
// perturbation every nqmInterval iterations, Ray's other defaults) until
// every trial reaches iteration nqmT. The trials run in lockstep, one
// iteration each in turn, all at once (no trial waits, so none is paused
// to let another run). Each iteration saves a checkpoint and reports
// training_iteration and loss. Exploits are carried out as the controller
// does: the trial restarts from the donor's checkpoint (its loss and its
// iteration) with the new config, then Resumed. A result that reaches
// nqmT ends the trial without being judged (a stop condition, as Ray's
// should_stop comes before the scheduler) and is the trial's Complete.
// Each judged result draws from a generator seeded with (seed, ordinal).
func pbtRun(t testing.TB, seed uint64, lrs []float64) pbtNQM {
	cfg := DefaultPBTConfig()
	cfg.Objective = Objective{Metric: "loss", Mode: Min}
	cfg.TimeAttr, cfg.PerturbationInterval = "training_iteration", nqmInterval
	cfg.HyperparamMutations = map[string]Mutation{"lr": {Sample: sampleLR}}
	p, err := NewPBT(cfg)
	if err != nil {
		t.Fatal(err)
	}
	trials := make([]*nqmTrial, len(lrs))
	byID := map[string]*nqmTrial{}
	for i, lr := range lrs {
		tr := &nqmTrial{id: fmt.Sprint("t", i), config: map[string]any{"lr": lr}, loss: nqmL0}
		trials[i], byID[tr.id] = tr, tr
		p.Add(tr.id, nil)
	}
	config := func(id string) map[string]any { return byID[id].config }
	checkpoints := map[string]nqmCheckpoint{}
	out := pbtNQM{best: math.Inf(1)}
	judged := uint64(0)
	for live := len(trials); live > 0; {
		for _, tr := range trials {
			if tr.done {
				continue
			}
			lr, _ := tr.config["lr"].(float64)
			tr.loss, tr.iter = nqmTrain(tr.loss, lr), tr.iter+1
			out.steps += nqmSteps
			name := fmt.Sprintf("%s/checkpoint_%06d", tr.id, tr.iter)
			checkpoints[name] = nqmCheckpoint{loss: tr.loss, iter: tr.iter}
			res := Result{Trial: tr.id, Checkpoint: name,
				Metrics: map[string]float64{"training_iteration": float64(tr.iter), "loss": tr.loss}}
			if tr.iter >= nqmT {
				tr.done, live = true, live-1
				p.Complete(res)
				out.best = min(out.best, tr.loss)
				continue
			}
			judged++
			d := p.Result(res, Context{Rand: rand.New(rand.NewPCG(seed, judged)), Config: config})[0]
			if d.Action != Exploit {
				continue
			}
			from, ok := checkpoints[d.Exploit.SourceCheckpoint]
			if !ok {
				t.Fatalf("%s exploits %q, which was never saved", tr.id, d.Exploit.SourceCheckpoint)
			}
			tr.loss, tr.iter, tr.config = from.loss, from.iter, d.Exploit.NewConfig
			p.Resumed(tr.id)
			out.exploits++
		}
	}
	return out
}

// TestPBTRegret is PBT's quality study: on the noisy quadratic model, where
// the best learning rate falls as training goes on, PBT's population of 8
// trials (each trained 40 iterations, perturbed every 2) against random
// search at the same budget, over 30 seeds. Both start from the same 8
// configs; random search trains each to the end at its fixed lr and draws
// one more config for every 40 iterations PBT spent beyond 8 × 40 (an
// exploit of a donor's checkpoint older than the trial's own repeats
// iterations). Run it with
// TUNEJET_REGRET=1 go test -v -run PBTRegret ./internal/sched.
//
// PBT ends at 1.8 times the best schedule's loss (median; random search
// 4.1 times, the best fixed lr of a fine grid 3.25 times). It needs
// perturbations often enough to follow the best rate down: that rate
// falls tenfold between iteration 4 and 40, and a lineage's lr shrinks by
// at most the factor 0.8 per exploit unless a resample jumps. Perturbed
// every 4 iterations (10 times per trial), PBT's median was 3.3 times the
// optimum [2.4, 4.8], still below random search's but no better than the
// best fixed lr; perturbed every iteration, 1.5 times [1.3, 1.6].
func TestPBTRegret(t *testing.T) {
	if os.Getenv("TUNEJET_REGRET") != "1" {
		t.Skip("set TUNEJET_REGRET=1 to run the PBT quality study")
	}
	opt := nqmOptimum()
	gridLR, gridLoss := nqmGrid()
	const seeds = 30
	var pbt, random, configs, exploits, repeated []float64
	wins := 0
	for seed := range uint64(seeds) {
		r := rand.New(rand.NewPCG(seed, 0))
		lrs := make([]float64, nqmPop)
		for i := range lrs {
			lrs[i], _ = sampleLR(r).(float64)
		}
		run := pbtRun(t, seed, lrs)
		budget := nqmPop * nqmT * nqmSteps
		for n := len(lrs); n*nqmT*nqmSteps < run.steps; n++ {
			x, _ := sampleLR(r).(float64)
			lrs = append(lrs, x)
		}
		best := math.Inf(1)
		for _, lr := range lrs {
			best = min(best, nqmFixed(lr))
		}
		if run.best < best {
			wins++
		}
		pbt = append(pbt, run.best)
		random = append(random, best)
		configs = append(configs, float64(len(lrs)))
		exploits = append(exploits, float64(run.exploits))
		repeated = append(repeated, float64(run.steps-budget)/nqmSteps)
	}
	q := func(xs []float64, format string) string {
		p25, _ := nanPercentile(xs, 25)
		p50, _ := nanPercentile(xs, 50)
		p75, _ := nanPercentile(xs, 75)
		lo, hi := medianCI(xs)
		f := format + " [" + format + ", " + format + "], 95%% CI of the median [" + format + ", " + format + "]"
		return fmt.Sprintf(f, p50, p25, p75, lo, hi)
	}
	ratio := func(xs []float64) []float64 {
		out := make([]float64, len(xs))
		for i, x := range xs {
			out[i] = x / opt
		}
		return out
	}
	t.Logf("noisy quadratic, sigma^2 %g, %d iterations of %d steps; %d seeds, median [IQR]:", nqmNoise, nqmT, nqmSteps, seeds)
	t.Logf("  best schedule (lr = L/(L+sigma^2) each step): final loss %.3g", opt)
	t.Logf("  best fixed lr on a grid:   lr %.4f, final loss %.3g (%.2fx the optimum)", gridLR, gridLoss, gridLoss/opt)
	t.Logf("  random search final loss:  %s", q(random, "%.3g"))
	t.Logf("  PBT final loss:            %s", q(pbt, "%.3g"))
	t.Logf("  random search / optimum:   %s", q(ratio(random), "%.2f"))
	t.Logf("  PBT / optimum:             %s", q(ratio(pbt), "%.2f"))
	t.Logf("  random search configs:     %s", q(configs, "%.0f"))
	t.Logf("  PBT exploits:              %s", q(exploits, "%.0f"))
	t.Logf("  PBT iterations repeated:   %s", q(repeated, "%.0f"))
	t.Logf("  PBT ends below random search in %d of %d seeds", wins, seeds)
	mp, _ := median(pbt)
	mr, _ := median(random)
	if mp >= mr {
		t.Errorf("PBT's median final loss %.3g is not below random search's %.3g", mp, mr)
	}
	if mp >= gridLoss {
		t.Errorf("PBT's median final loss %.3g is not below the best fixed lr's %.3g", mp, gridLoss)
	}
}

// pbtInterleaved runs examples/pbt's experiment on the noisy quadratic:
// one trial per initial lr, conc of them at a time, each to iteration
// iters, perturbed every nqmInterval. Each turn, one running trial (the
// previous one with probability sticky, else one drawn uniformly by pick)
// trains an iteration and reports it with a checkpoint. A Pause or an
// Exploit decision sends the trial to the back of the queue of waiting
// trials (carrying the exploit out first), and the trial at the front
// starts (Resumed, if it ran before). It returns the trials' final
// losses.
func pbtInterleaved(t testing.TB, seed uint64, lrs []float64, iters, conc int, sticky float64, pick *rand.Rand) []float64 {
	cfg := DefaultPBTConfig()
	cfg.Objective = Objective{Metric: "loss", Mode: Min}
	cfg.TimeAttr, cfg.PerturbationInterval = "training_iteration", nqmInterval
	cfg.HyperparamMutations = map[string]Mutation{"lr": {Sample: sampleLR}}
	p, err := NewPBT(cfg)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]*nqmTrial{}
	var waiting, running []*nqmTrial
	for i, lr := range lrs {
		tr := &nqmTrial{id: fmt.Sprint("t", i), config: map[string]any{"lr": lr}, loss: nqmL0}
		byID[tr.id] = tr
		p.Add(tr.id, nil)
		waiting = append(waiting, tr)
	}
	config := func(id string) map[string]any { return byID[id].config }
	checkpoints := map[string]nqmCheckpoint{}
	ran := map[string]bool{}
	var finals []float64
	var last *nqmTrial
	judged := uint64(0)
	for len(waiting)+len(running) > 0 {
		for len(running) < conc && len(waiting) > 0 {
			tr := waiting[0]
			waiting = waiting[1:]
			if ran[tr.id] {
				p.Resumed(tr.id)
			}
			ran[tr.id] = true
			running = append(running, tr)
		}
		i := slices.Index(running, last)
		if i < 0 || pick.Float64() >= sticky {
			i = pick.IntN(len(running))
		}
		tr := running[i]
		last = tr
		lr, _ := tr.config["lr"].(float64)
		tr.loss, tr.iter = nqmTrain(tr.loss, lr), tr.iter+1
		name := fmt.Sprintf("%s/checkpoint_%06d", tr.id, tr.iter)
		checkpoints[name] = nqmCheckpoint{loss: tr.loss, iter: tr.iter}
		res := Result{Trial: tr.id, Checkpoint: name,
			Metrics: map[string]float64{"training_iteration": float64(tr.iter), "loss": tr.loss}}
		if tr.iter >= iters {
			p.Complete(res)
			finals = append(finals, tr.loss)
			running = slices.Delete(running, i, i+1)
			continue
		}
		judged++
		d := p.Result(res, Context{Rand: rand.New(rand.NewPCG(seed, judged)), Waiting: len(waiting) > 0, Config: config})[0]
		switch d.Action {
		case Exploit:
			from := checkpoints[d.Exploit.SourceCheckpoint]
			tr.loss, tr.iter, tr.config = from.loss, from.iter, d.Exploit.NewConfig
			fallthrough
		case Pause:
			running = slices.Delete(running, i, i+1)
			waiting = append(waiting, tr)
		}
	}
	return finals
}

// TestPBTExampleOrders backs the claim TestPBTExample (cmd/tunejet)
// checks: examples/pbt's population ends better than it starts, in
// whatever order its results come in. For the initial configs of the
// example's seed 39, and of seeds 1 to 5 for comparison, it runs the
// experiment (8 trials of 30 iterations) 600 times: 2 or 4 trials at a
// time, their iterations interleaved at random or in bursts (the same
// trial again with probability 0.9 or 0.97). It counts the runs where the
// median final loss is not below the median of the losses the initial
// lrs reach alone, and, for comparison, those where the best final loss
// is not below the best initial lr's alone. Run it with
// TUNEJET_REGRET=1 go test -v -run PBTExampleOrders ./internal/sched.
//
// Seed 39: neither ever (the median at 0.06 times the initial one at
// most). Seeds 1 to 5: the median never (at 0.65 times at most), the best
// in 394 of 3,000 runs. The median is not beyond doubt either: with 300
// runs per setting, 2 of seed 1's 1,800 ended above (2.45 times).
func TestPBTExampleOrders(t *testing.T) {
	if os.Getenv("TUNEJET_REGRET") != "1" {
		t.Skip("set TUNEJET_REGRET=1 to run the PBT example's simulation")
	}
	const iters, runs = 30, 100
	space, err := search.ParseSpace(map[string]any{"lr": map[string]any{"loguniform": []any{nqmLRLow, nqmLRHigh}}})
	if err != nil {
		t.Fatal(err)
	}
	alone := func(lr float64) float64 {
		loss := nqmL0
		for range iters {
			loss = nqmTrain(loss, lr)
		}
		return loss
	}
	med := func(xs []float64) float64 {
		ys := slices.Sorted(slices.Values(xs))
		return (ys[(len(ys)-1)/2] + ys[len(ys)/2]) / 2
	}
	for _, seed := range []int64{39, 1, 2, 3, 4, 5} {
		lrs := make([]float64, nqmPop)
		alones := make([]float64, nqmPop)
		for i := range lrs {
			config, _ := space.Trial(i, seed)
			lrs[i], _ = config["lr"].(float64)
			alones[i] = alone(lrs[i])
		}
		medAlone, bestAlone := med(alones), slices.Min(alones)
		medFails, bestFails, n, worst := 0, 0, 0, 0.0
		for _, conc := range []int{2, 4} {
			for _, sticky := range []float64{0, 0.9, 0.97} {
				for r := range uint64(runs) {
					pick := rand.New(rand.NewPCG(uint64(seed), r))
					finals := pbtInterleaved(t, r, lrs, iters, conc, sticky, pick)
					n++
					worst = max(worst, med(finals)/medAlone)
					if med(finals) >= medAlone {
						medFails++
					}
					if slices.Min(finals) >= bestAlone {
						bestFails++
					}
				}
			}
		}
		t.Logf("seed %2d: median final >= median alone in %d of %d runs (at most %.2f times); best final >= best alone in %d",
			seed, medFails, n, worst, bestFails)
		if seed == 39 && (medFails > 0 || bestFails > 0) {
			t.Errorf("seed 39, the example's: the median or the best did not end below in every run")
		}
	}
}
