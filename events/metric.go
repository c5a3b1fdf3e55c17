package events

import "strings"

// ResultValue is the value of metric in a trial's result. A name with
// slashes ("val/loss") that is not a key of the result is looked up in
// nested mappings, as Ray names the metrics of a flattened result.
func ResultValue(result map[string]any, metric string) (any, bool) {
	if v, ok := result[metric]; ok || !strings.Contains(metric, "/") {
		return v, ok
	}
	return lookupPath(result, strings.Split(metric, "/"))
}

// lookupPath is the value at path through nested mappings.
func lookupPath(m map[string]any, path []string) (any, bool) {
	var cur any = m
	for _, part := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = mm[part]; !ok {
			return nil, false
		}
	}
	return cur, true
}
