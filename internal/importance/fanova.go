package importance

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
)

// Param is one parameter's column: its name and its value per trial,
// already numeric, and its bounds. A numeric parameter's values lie in
// [Low, High] (bounds that do not hold every value are widened to); a
// categorical one's values are choice indices 0, 1, ..., with High the
// last index (Low is ignored).
type Param struct {
	Name        string
	Values      []float64
	Categorical bool
	Low, High   float64
}

// Importance is a parameter's share of the variance of the target.
type Importance struct {
	Param      string  `json:"param"`
	Importance float64 `json:"importance"`
}

// MaxSamples is the most trials each tree is fitted on: with more trials,
// each tree's bootstrap sample draws MaxSamples of them (scikit-learn's
// max_samples) instead of as many as there are. Optuna draws all of them;
// the cap bounds the time of a forest on many trials (fitting a tree costs
// about its samples times its depth times the columns), and 64 trees of
// 2,000 draws still see most trials of 10,000 many times over.
const MaxSamples = 2000

// MaxOneHotChoices is the most choices a categorical parameter is one-hot
// encoded with, as Optuna does; one with more is encoded as its choice
// index instead, because the marginal of a one-hot parameter is taken over
// every corner of its columns' grid, 2^choices cells.
const MaxOneHotChoices = 12

// Fanova returns each parameter's importance for target (one value per
// trial, finite), by fANOVA over a random forest as Optuna's
// FanovaImportanceEvaluator computes it (see the package documentation),
// normalized to sum to 1 as optuna.importance.get_param_importances does.
// The result is sorted by importance, largest first, ties by name. A
// parameter with a single possible or observed value gets 0. When the
// target is constant every importance is 0. The forest's generator is
// seeded with seed: the same arguments give the same result.
func Fanova(params []Param, target []float64, seed uint64) ([]Importance, error) {
	n := len(target)
	if n < 2 {
		return nil, fmt.Errorf("importance: fANOVA needs 2 trials or more, got %d", n)
	}
	for _, y := range target {
		if math.IsNaN(y) || math.IsInf(y, 0) {
			return nil, errors.New("importance: the target holds a value that is not finite")
		}
	}
	for _, p := range params {
		if len(p.Values) != n {
			return nil, fmt.Errorf("importance: parameter %q has %d values for %d trials", p.Name, len(p.Values), n)
		}
	}
	enc, err := encode(params)
	if err != nil {
		return nil, err
	}
	raw, varies := make([]float64, len(params)), false
	if len(enc.cols) > 0 {
		raw, varies = fitAndDecompose(enc, target, seed)
	}
	return normalize(params, enc, raw, varies), nil
}

// encoding is the parameters as the forest's features: the columns, each
// column's bounds, and per parameter the indices of its columns (none for
// a single-valued parameter, left out as Optuna leaves it out).
type encoding struct {
	cols      [][]float64
	low, high []float64
	of        [][]int
}

// encode turns the parameters into columns as Optuna's
// _SearchSpaceTransform does with transform_log and transform_step false:
// a numeric parameter is one column with its bounds, a categorical one a
// 0/1 column per choice with bounds [0, 1].
func encode(params []Param) (*encoding, error) {
	e := &encoding{of: make([][]int, len(params))}
	add := func(p int, col []float64, low, high float64) {
		e.of[p] = append(e.of[p], len(e.cols))
		e.cols = append(e.cols, col)
		e.low = append(e.low, low)
		e.high = append(e.high, high)
	}
	for pi, p := range params {
		low, high := p.Low, p.High
		if p.Categorical {
			low = 0
		}
		for _, v := range p.Values {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("importance: parameter %q has a value that is not finite", p.Name)
			}
			if p.Categorical && (v != math.Trunc(v) || v < 0 || v > p.High) {
				return nil, fmt.Errorf("importance: categorical parameter %q has value %v, not a choice index in [0, %v]", p.Name, v, p.High)
			}
			low, high = min(low, v), max(high, v)
		}
		if high <= low || slices.Min(p.Values) == slices.Max(p.Values) {
			continue // a single value explains nothing
		}
		choices := int(high) + 1
		if !p.Categorical || choices > MaxOneHotChoices {
			if p.Categorical {
				low, high = -0.5, high+0.5 // each index owns a unit interval
			}
			add(pi, p.Values, low, high)
			continue
		}
		for c := range choices {
			col := make([]float64, len(p.Values))
			for i, v := range p.Values {
				if int(v) == c {
					col[i] = 1
				}
			}
			add(pi, col, 0, 1)
		}
	}
	return e, nil
}

// fitAndDecompose fits the forest and returns each parameter's fANOVA
// fraction (its marginal variance over the tree's variance) averaged over
// the trees whose variance is not 0, and whether there is one such tree
// (there is none when the target is constant).
// Trees are fitted in parallel, each with a generator of its own seeded by
// (seed, tree index), so that the result does not depend on scheduling.
func fitAndDecompose(enc *encoding, y []float64, seed uint64) ([]float64, bool) {
	d := newData(enc.cols, y)
	fractions := make([][]float64, NumTrees) // nil for a tree of variance 0
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(runtime.GOMAXPROCS(0), NumTrees) {
		wg.Go(func() {
			for t := range next {
				rng := rand.New(rand.NewPCG(seed, uint64(t)))
				tr := growTree(d, bootstrap(len(y), min(len(y), MaxSamples), rng), rng)
				fractions[t] = decompose(tr, enc)
			}
		})
	}
	for t := range NumTrees {
		next <- t
	}
	close(next)
	wg.Wait()
	out := make([]float64, len(enc.of))
	counted := 0
	for _, f := range fractions {
		if f == nil {
			continue
		}
		counted++
		for p, v := range f {
			out[p] += v
		}
	}
	if counted > 0 {
		for p := range out {
			out[p] /= float64(counted)
		}
	}
	return out, counted > 0
}

// bootstrap draws m of the n samples with replacement, as
// RandomForestRegressor's bootstrap does with max_samples m, and returns
// each sample's count as its weight.
func bootstrap(n, m int, rng *rand.Rand) []float64 {
	w := make([]float64, n)
	for range m {
		w[rng.IntN(n)]++
	}
	return w
}

// normalize scales the raw fractions to sum to 1, as get_param_importances
// does, and sorts them. When they sum to 0 although the forest's trees
// vary (the target depends on the parameters only through interactions),
// the parameters that vary share 1 equally, as get_param_importances
// shares it among all; when no tree varies (a constant target, where
// Optuna's fANOVA raises an error) every importance is 0.
func normalize(params []Param, enc *encoding, raw []float64, varies bool) []Importance {
	sum, varying := 0.0, 0
	for p, v := range raw {
		sum += v
		if len(enc.of[p]) > 0 {
			varying++
		}
	}
	out := make([]Importance, len(params))
	for i, p := range params {
		out[i] = Importance{Param: p.Name}
		switch {
		case sum > 0:
			out[i].Importance = raw[i] / sum
		case varies && len(enc.of[i]) > 0:
			out[i].Importance = 1 / float64(varying)
		}
	}
	slices.SortFunc(out, func(a, b Importance) int {
		return cmp.Or(cmp.Compare(b.Importance, a.Importance), cmp.Compare(a.Param, b.Param))
	})
	return out
}

// sortByValue sorts the sample indices idx by col, ties by index.
func sortByValue(idx []int, col []float64) {
	slices.SortFunc(idx, func(a, b int) int {
		return cmp.Or(cmp.Compare(col[a], col[b]), cmp.Compare(a, b))
	})
}
