package spec

import "strings"

// suggest returns the known key closest to name, or "" if none is close:
// the same key in another spelling (numSamples, num-samples), or one at
// most two edits away that is not mostly different.
func suggest(name string, known []string) string {
	best, bestDist := "", 3
	for _, k := range known {
		if fold(k) == fold(name) {
			return k
		}
		if d := editDistance(name, k); d < bestDist && 3*d <= len(name) {
			best, bestDist = k, d
		}
	}
	return best
}

// fold lower-cases s and drops '_' and '-'.
func fold(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r == '-' {
			return -1
		}
		return r
	}, strings.ToLower(s))
}

// editDistance is the optimal string alignment distance between a and b:
// insertions, deletions, substitutions and swaps of neighbours count one.
func editDistance(a, b string) int {
	rows := make([][]int, len(a)+1)
	for i := range rows {
		rows[i] = make([]int, len(b)+1)
		rows[i][0] = i
	}
	for j := range rows[0] {
		rows[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			rows[i][j] = editStep(rows, a, b, i, j)
		}
	}
	return rows[len(a)][len(b)]
}

func editStep(rows [][]int, a, b string, i, j int) int {
	cost := 1
	if a[i-1] == b[j-1] {
		cost = 0
	}
	d := min(rows[i-1][j]+1, rows[i][j-1]+1, rows[i-1][j-1]+cost)
	if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
		d = min(d, rows[i-2][j-2]+1)
	}
	return d
}
