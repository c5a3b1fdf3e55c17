// Package show formats what a user reads of an experiment: config values
// (as JSON, never as Go prints them) and its progress. The status table,
// tunejet results, explain and status, and the dashboard all use it, so a
// value reads the same everywhere.
package show

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tunejet/tunejet/internal/state"
)

// JSON is v as compact JSON with the keys of its mappings sorted and <, >
// and & as they are: how a config, or any value that is a mapping or a
// list, reads. A NaN or an infinity, which JSON cannot hold, reads as the
// string "NaN", "Infinity" or "-Infinity".
func JSON(v any) string {
	s, err := encode(v)
	if err != nil {
		if s, err = encode(finite(v)); err != nil {
			return strconv.Quote(fmt.Sprint(v))
		}
	}
	return s
}

func encode(v any) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// finite is v with each NaN or infinite float64 of its mappings and lists
// replaced by its name.
func finite(v any) any {
	switch x := v.(type) {
	case float64:
		switch {
		case math.IsNaN(x):
			return "NaN"
		case math.IsInf(x, 1):
			return "Infinity"
		case math.IsInf(x, -1):
			return "-Infinity"
		}
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = finite(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = finite(e)
		}
		return out
	}
	return v
}

// Cell is a value in a table's cell: nothing for none, a number with 5
// significant digits, a string as it is, anything else as JSON.
func Cell(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case float64:
		return fmt.Sprintf("%.5g", x)
	case string:
		return x
	case bool:
		return strconv.FormatBool(x)
	}
	return JSON(v)
}

// Progress says how far an experiment has come, as the status table and
// the dashboard show it: "30/200 trials done (15%), ETA 5m20s",
// "7/unbounded trials done (num_samples -1)", or "" while the total is not
// known.
func Progress(p state.Progress) string {
	switch {
	case p.Total < 0:
		return fmt.Sprintf("%d/unbounded trials done (num_samples -1)", p.Ended)
	case p.Total == 0:
		return ""
	}
	s := fmt.Sprintf("%d/%d trials done (%d%%)", p.Ended, p.Total, int(100*float64(p.Ended)/float64(p.Total)))
	switch {
	case p.ETA <= 0:
	case p.ETA < time.Second:
		s += ", ETA <1s"
	default:
		s += ", ETA " + p.ETA.Round(time.Second).String()
	}
	return s
}

// LastLine is the last line of s that is not blank, trimmed: the line of
// an error that names its cause (a Python traceback's exception, a
// command's last line of stderr).
func LastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return strings.TrimSpace(s)
}

// Cut shortens s to most runes, ending with "..." when it cut.
func Cut(s string, most int) string {
	if utf8.RuneCountInString(s) <= most {
		return s
	}
	return string([]rune(s)[:max(most-3, 0)]) + "..."
}
