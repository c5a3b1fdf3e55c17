package settings

import "strings"

// Suggest returns the name in known closest to name, or "" if none is
// close: the same name in another spelling (numSamples, num-samples,
// Log_Uniform), or one at most two edits away that is not mostly different.
// Spellings are compared lower-cased and without '_' and '-'. The spec
// parser uses it for unknown keys, and ParseSpace for misspelled domain
// keywords.
func Suggest(name string, known []string) string {
	f := fold(name)
	best, bestDist := "", 3
	for _, k := range known {
		fk := fold(k)
		if fk == f {
			return k
		}
		if abs(len(fk)-len(f)) >= bestDist {
			continue // too far apart to be closer than best
		}
		if d := editDistance(f, fk); d < bestDist && 3*d <= len(f) {
			best, bestDist = k, d
		}
	}
	return best
}

func abs(n int) int { return max(n, -n) }

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
