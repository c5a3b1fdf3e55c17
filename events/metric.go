package events

import "strings"

// ResultValue is the value of metric in a trial's result. A name with
// slashes ("val/loss") that is not a key of the result is looked up in
// nested mappings, as Ray names the metrics of a flattened result.
func ResultValue(result map[string]any, metric string) (any, bool) {
	if v, ok := result[metric]; ok || !strings.Contains(metric, "/") {
		return v, ok
	}
	var cur any = result
	for _, part := range strings.Split(metric, "/") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[part]; !ok {
			return nil, false
		}
	}
	return cur, true
}
