package importance

import (
	"math/rand/v2"
)

// The forest's settings are those of Optuna's FanovaImportanceEvaluator
// (optuna/importance/_fanova/_evaluator.py at Optuna commit 1d8ce7bb):
// 64 trees of depth at most 64, a node split while it holds 2 distinct
// samples or more, a leaf holding at least one.
const (
	// NumTrees is the number of trees in the forest.
	NumTrees = 64
	// MaxDepth is the depth below which no node is split (the root is at
	// depth 0).
	MaxDepth = 64
)

// featureThreshold is scikit-learn's FEATURE_THRESHOLD: two values of a
// feature closer than it are not split apart.
const featureThreshold = 1e-7

// epsilon is scikit-learn's EPSILON (the double's machine epsilon): a node
// whose impurity is at most it is a leaf.
const epsilon = 2.220446049250313e-16

// node is one node of a regression tree. A leaf has feature -1 and the
// weighted mean of its samples' targets as value; an inner node sends a
// sample whose feature is at most threshold to left, the others to right.
type node struct {
	feature     int
	threshold   float64
	left, right int
	value       float64
}

// data is the forest's training set: X by column (one column per encoded
// feature, see encode), the target, and, per feature, every sample's index
// sorted by the feature's value, shared by all trees.
type data struct {
	cols   [][]float64
	y      []float64
	sorted [][]int
}

func newData(cols [][]float64, y []float64) *data {
	d := &data{cols: cols, y: y, sorted: make([][]int, len(cols))}
	for f, col := range cols {
		idx := make([]int, len(y))
		for i := range idx {
			idx[i] = i
		}
		sortByValue(idx, col)
		d.sorted[f] = idx
	}
	return d
}

// grower fits one tree as scikit-learn's DecisionTreeRegressor does with
// criterion "squared_error", splitter "best", max_features all features
// (RandomForestRegressor's default), min_samples_split 2 and
// min_samples_leaf 1: each node takes the split, over every feature in a
// random order and every midpoint between two consecutive distinct
// values, that maximizes the weighted variance reduction; a later
// candidate replaces the best only when strictly better, so the random
// feature order breaks ties. Samples carry weights (their bootstrap
// counts); one of weight 0 is left out, as scikit-learn does.
//
// Each feature keeps the tree's samples sorted by its value, with the
// values alongside (order and xs); a node owns the same range of every
// feature's arrays, and a split partitions each range stably, so that no
// node sorts.
type grower struct {
	d     *data
	sw    []weighted // per sample
	rng   *rand.Rand
	order [][]int32
	xs    [][]float64
	left  []bool // per sample, whether the split being applied sends it left
	ibuf  []int32
	xbuf  []float64
	perm  []int
	nodes []node
}

// weighted is a sample's weight and its weight times its target.
type weighted struct{ w, wy float64 }

// growTree fits a tree on the samples of weight w[i] > 0.
func growTree(d *data, w []float64, rng *rand.Rand) []node {
	nf := len(d.cols)
	g := &grower{d: d, rng: rng, sw: make([]weighted, len(w)), order: make([][]int32, nf), xs: make([][]float64, nf),
		left: make([]bool, len(w)), perm: make([]int, nf)}
	n := 0
	for i, wi := range w {
		g.sw[i] = weighted{wi, wi * d.y[i]}
		if wi > 0 {
			n++
		}
	}
	for f := range nf {
		o, x := make([]int32, 0, n), make([]float64, 0, n)
		for _, i := range d.sorted[f] {
			if w[i] > 0 {
				o = append(o, int32(i))
				x = append(x, d.cols[f][i])
			}
		}
		g.order[f], g.xs[f] = o, x
		g.perm[f] = f
	}
	g.ibuf, g.xbuf = make([]int32, n), make([]float64, n)
	g.nodes = make([]node, 0, 2*n)
	g.grow(0, n, 0)
	return g.nodes
}

// grow builds the node of the samples order[f][start:end] at depth and
// returns its index.
func (g *grower) grow(start, end, depth int) int {
	id := len(g.nodes)
	g.nodes = append(g.nodes, node{feature: -1})
	samples := g.order[0][start:end]
	var wsum, ysum float64
	for _, i := range samples {
		wsum += g.sw[i].w
		ysum += g.sw[i].wy
	}
	mean := ysum / wsum
	g.nodes[id].value = mean
	if end-start < 2 || depth >= MaxDepth {
		return id
	}
	var impurity float64
	for _, i := range samples {
		dy := g.d.y[i] - mean
		impurity += g.sw[i].w * dy * dy
	}
	if impurity/wsum <= epsilon {
		return id
	}
	f, pos, threshold, ok := g.bestSplit(start, end, wsum, ysum)
	if !ok {
		return id
	}
	g.partition(f, start, end, threshold)
	l := g.grow(start, pos, depth+1)
	r := g.grow(pos, end, depth+1)
	g.nodes[id] = node{feature: f, threshold: threshold, left: l, right: r, value: mean}
	return id
}

// bestSplit finds the node's best split: its feature, the position in
// order[feature] of the first sample that goes right, and its threshold.
func (g *grower) bestSplit(start, end int, wsum, ysum float64) (feature, pos int, threshold float64, ok bool) {
	best := 0.0
	g.rng.Shuffle(len(g.perm), func(i, j int) { g.perm[i], g.perm[j] = g.perm[j], g.perm[i] })
	for _, f := range g.perm {
		o, x := g.order[f][start:end], g.xs[f][start:end]
		if x[len(x)-1] <= x[0]+featureThreshold {
			continue // constant in this node
		}
		var wl, sl float64
		for p := 1; p < len(o); p++ {
			s := g.sw[o[p-1]]
			wl += s.w
			sl += s.wy
			prev, cur := x[p-1], x[p]
			if cur <= prev+featureThreshold {
				continue
			}
			wr, sr := wsum-wl, ysum-sl
			proxy := sl*sl/wl + sr*sr/wr
			if !ok || proxy > best {
				best, feature, pos, ok = proxy, f, start+p, true
				threshold = prev/2 + cur/2
				if threshold == cur {
					threshold = prev // scikit-learn's guard against rounding up to cur
				}
			}
		}
	}
	return feature, pos, threshold, ok
}

// partition reorders order[h][start:end] (and xs) of every feature h,
// stably, so that the samples whose feature f is at most threshold come
// first.
func (g *grower) partition(f, start, end int, threshold float64) {
	x := g.xs[f][start:end]
	for p, i := range g.order[f][start:end] {
		g.left[i] = x[p] <= threshold
	}
	for h := range g.order {
		o, x := g.order[h][start:end], g.xs[h][start:end]
		ib, xb := g.ibuf[:0], g.xbuf[:0]
		k := 0
		for p, i := range o {
			if g.left[i] {
				o[k], x[k] = i, x[p]
				k++
			} else {
				ib, xb = append(ib, i), append(xb, x[p])
			}
		}
		copy(o[k:], ib)
		copy(x[k:], xb)
	}
}
