package importance

import (
	"slices"
)

// leaf is a tree's leaf: its box, per feature the cells of the
// feature's breakpoints it spans (from lo[f] to hi[f]-1, that is the
// interval (breaks[f][lo[f]], breaks[f][hi[f]]]), its volume and its
// value.
type leaf struct {
	lo, hi []int32
	vol    float64
	value  float64
}

// leaves returns the tree's leaves with their boxes, the root's box being
// the whole search space. The walk keeps the current box in place and
// copies it at each leaf, into one backing array for all the leaves.
func leaves(tr []node, breaks [][]float64) []leaf {
	nf := len(breaks)
	lo, hi := make([]int32, nf), make([]int32, nf)
	for f, b := range breaks {
		hi[f] = int32(len(b) - 1)
	}
	nleaves := (len(tr) + 1) / 2
	out := make([]leaf, 0, nleaves)
	store := make([]int32, 0, 2*nf*nleaves)
	var walk func(id int)
	walk = func(id int) {
		nd := tr[id]
		if nd.feature < 0 {
			vol := 1.0
			for f, b := range breaks {
				vol *= b[hi[f]] - b[lo[f]]
			}
			n := len(store)
			store = append(append(store, lo...), hi...)
			out = append(out, leaf{lo: store[n : n+nf : n+nf], hi: store[n+nf : n+2*nf : n+2*nf], vol: vol, value: nd.value})
			return
		}
		f := nd.feature
		t, _ := slices.BinarySearch(breaks[f], nd.threshold)
		was := hi[f]
		hi[f] = int32(t)
		walk(nd.left)
		hi[f] = was
		was = lo[f]
		lo[f] = int32(t)
		walk(nd.right)
		lo[f] = was
	}
	walk(0)
	return out
}

// decompose returns each parameter's fANOVA fraction in the tree: the
// variance of its marginal prediction over the variance of the tree's
// prediction, both over the uniform distribution on the search space, as
// _FanovaTree (optuna/importance/_fanova/_tree.py, Optuna commit 1d8ce7bb)
// computes them; nil when the tree's variance is 0.
//
// The tree's variance is that of the leaves' values weighted by their
// volumes. A parameter's marginal prediction is piecewise constant on the
// cells cut by the tree's thresholds on its columns: in each cell, the
// mean of the values of the leaves that cross it, each weighted by its
// volume outside the parameter's columns. Optuna walks the tree once per
// cell, from a point in it; here each leaf adds its weighted value to the
// cells its box spans, which gives the same sums with one pass over the
// leaves (and, for a numeric parameter, a difference array over the
// cells).
func decompose(tr []node, enc *encoding) []float64 {
	breaks := breakpoints(tr, enc)
	ls := leaves(tr, breaks)
	var total, wsum float64
	for _, l := range ls {
		total += l.vol
		wsum += l.vol * l.value
	}
	mean := wsum / total
	treeVar := 0.0
	for _, l := range ls {
		d := l.value - mean
		treeVar += l.vol * d * d
	}
	treeVar /= total
	if !(treeVar > 0) {
		return nil
	}
	out := make([]float64, len(enc.of))
	for p, cols := range enc.of {
		if len(cols) == 0 {
			continue
		}
		out[p] = max(marginalVariance(ls, cols, breaks), 0) / treeVar
	}
	return out
}

// breakpoints returns, per feature, its lower bound, the tree's distinct
// thresholds on it in increasing order, and its upper bound: the ends of
// the cells of the feature's marginal.
func breakpoints(tr []node, enc *encoding) [][]float64 {
	out := make([][]float64, len(enc.cols))
	for _, nd := range tr {
		if nd.feature >= 0 {
			out[nd.feature] = append(out[nd.feature], nd.threshold)
		}
	}
	for f := range out {
		t := out[f]
		slices.Sort(t)
		t = slices.Compact(t)
		out[f] = append(append([]float64{enc.low[f]}, t...), enc.high[f])
	}
	return out
}

// marginalVariance is the variance of the marginal prediction of the
// parameter whose columns are cols, over its cells weighted by their
// volume.
func marginalVariance(ls []leaf, cols []int, breaks [][]float64) float64 {
	// The cells are numbered in mixed radix, the first column varying
	// slowest; dims[k] is the number of cells along cols[k].
	dims := make([]int, len(cols))
	ncells := 1
	for k, c := range cols {
		dims[k] = len(breaks[c]) - 1
		ncells *= dims[k]
	}
	// num and wt sum, per cell, the weighted values and the weights of the
	// leaves crossing it; with one column they are difference arrays.
	num, wt := make([]float64, ncells+1), make([]float64, ncells+1)
	from, to := make([]int, len(cols)), make([]int, len(cols))
	for _, l := range ls {
		w := l.vol
		for k, c := range cols {
			from[k], to[k] = int(l.lo[c]), int(l.hi[c])
			width := breaks[c][to[k]] - breaks[c][from[k]]
			if width <= 0 {
				w = 0
				break
			}
			w /= width
		}
		if w == 0 {
			continue
		}
		if len(cols) == 1 {
			num[from[0]] += w * l.value
			num[to[0]] -= w * l.value
			wt[from[0]] += w
			wt[to[0]] -= w
			continue
		}
		addBox(num, wt, dims, from, to, w, w*l.value)
	}
	if len(cols) == 1 {
		for i := 1; i < ncells; i++ {
			num[i] += num[i-1]
			wt[i] += wt[i-1]
		}
	}
	// The variance of the cells' means, each cell weighted by its
	// leaves' weight times its size along the columns, as Optuna weighs
	// each midpoint's marginal.
	values, weights := make([]float64, ncells), make([]float64, ncells)
	var total, sum float64
	for cell := range ncells {
		size, rest := 1.0, cell
		for k := len(cols) - 1; k >= 0; k-- {
			i := rest % dims[k]
			rest /= dims[k]
			b := breaks[cols[k]]
			size *= b[i+1] - b[i]
		}
		if !(wt[cell] > 0) || size <= 0 {
			continue
		}
		values[cell] = num[cell] / wt[cell]
		weights[cell] = wt[cell] * size
		total += weights[cell]
		sum += weights[cell] * values[cell]
	}
	if total == 0 {
		return 0
	}
	mean := sum / total
	v := 0.0
	for cell, w := range weights {
		d := values[cell] - mean
		v += w * d * d
	}
	return v / total
}

// addBox adds w to wt and wv to num in every cell of the box whose
// indices along each column k run from from[k] to to[k]-1.
func addBox(num, wt []float64, dims, from, to []int, w, wv float64) {
	idx := slices.Clone(from)
	for {
		cell := 0
		for k := range dims {
			cell = cell*dims[k] + idx[k]
		}
		num[cell] += wv
		wt[cell] += w
		k := len(dims) - 1
		for ; k >= 0; k-- {
			idx[k]++
			if idx[k] < to[k] {
				break
			}
			idx[k] = from[k]
		}
		if k < 0 {
			return
		}
	}
}
