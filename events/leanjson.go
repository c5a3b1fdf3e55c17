package events

import (
	"bytes"
	"strconv"
	"unicode/utf8"
)

// A lean JSON reader for the hot payload, trial.reported: it gives what
// encoding/json gives when it unmarshals the same bytes into a
// TrialReported (objects as map[string]any, numbers as float64, ...), in a
// single pass and without reflection. It reads only plain input — no
// escapes in strings, no nulls where a field is typed, no duplicate or
// differently-cased field names, nesting of at most maxLeanDepth — and
// says so when it meets anything else, and the caller falls back to
// encoding/json, whose answer (or error) then counts.

// commonKeys are the names in every result (Ray's automatic fields): the
// reader returns these strings instead of allocating a copy of each.
var commonKeys = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{
		"trial_id", "attempt", "earlier", "result", "training_iteration", "time_this_iter_s", "time_total_s",
		"time_since_restore", "iterations_since_restore", "timestamp", "date", "done", "hostname",
		"pid", "node_ip", "checkpoint_dir_name", "config",
	} {
		m[k] = k
	}
	return m
}()

// maxLeanDepth bounds the nesting the lean reader follows.
const maxLeanDepth = 64

type leanReader struct {
	b     []byte
	i     int
	depth int
	hint  int // size of the next object's map
}

// leanReported reads a trial.reported payload; ok is false when the lean
// reader cannot vouch for the answer.
func leanReported(data []byte) (p *TrialReported, ok bool) {
	r := leanReader{b: data}
	if !r.consume('{') {
		return nil, false
	}
	p = &TrialReported{}
	var seenTrial, seenAttempt, seenEarlier, seenResult bool
	if r.consume('}') {
		return p, r.end()
	}
	for {
		key, ok := r.str()
		if !ok || !r.consume(':') {
			return nil, false
		}
		switch key {
		case "trial_id":
			if seenTrial {
				return nil, false
			}
			seenTrial = true
			if p.TrialID, ok = r.str(); !ok {
				return nil, false
			}
		case "attempt":
			if seenAttempt {
				return nil, false
			}
			seenAttempt = true
			lit, ok := r.number()
			if !ok {
				return nil, false
			}
			n, err := strconv.ParseInt(lit, 10, 0)
			if err != nil {
				return nil, false
			}
			p.Attempt = int(n)
		case "result":
			if seenResult {
				return nil, false
			}
			seenResult = true
			r.skipSpace()
			if r.i >= len(r.b) || r.b[r.i] != '{' {
				return nil, false
			}
			// Size the map once: a flat result has a key per ':'.
			r.hint = bytes.Count(r.b[r.i:], []byte{':'})
			v, ok := r.value()
			if !ok {
				return nil, false
			}
			p.Result = v.(map[string]any)
		case "earlier":
			if seenEarlier {
				return nil, false
			}
			seenEarlier = true
			if p.Earlier, ok = r.results(); !ok {
				return nil, false
			}
		default:
			if foldsTo(key, "trial_id") || foldsTo(key, "attempt") || foldsTo(key, "result") || foldsTo(key, "earlier") {
				return nil, false // encoding/json matches field names without case
			}
			if _, ok := r.value(); !ok {
				return nil, false
			}
		}
		if r.consume(',') {
			continue
		}
		if r.consume('}') {
			return p, r.end()
		}
		return nil, false
	}
}

// results reads an array of result objects, sizing each map like the one
// before it (a trial's results share their keys).
func (r *leanReader) results() ([]map[string]any, bool) {
	if !r.consume('[') {
		return nil, false
	}
	out := []map[string]any{} // as encoding/json gives for []
	if r.consume(']') {
		return out, true
	}
	size := 16
	for {
		r.skipSpace()
		if r.i >= len(r.b) || r.b[r.i] != '{' {
			return nil, false
		}
		r.hint = size
		v, ok := r.value()
		if !ok {
			return nil, false
		}
		m := v.(map[string]any)
		size = len(m)
		out = append(out, m)
		if r.consume(',') {
			continue
		}
		if r.consume(']') {
			return out, true
		}
		return nil, false
	}
}

// foldsTo reports whether key equals name ignoring ASCII case. Non-ASCII
// keys never fold to our ASCII names in the lean reader: it gives up on
// them (encoding/json also folds a few Unicode letters, like 'ſ' to 's').
func foldsTo(key, name string) bool {
	if len(key) != len(name) {
		for i := 0; i < len(key); i++ {
			if key[i] >= utf8.RuneSelf {
				return true
			}
		}
		return false
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if c >= utf8.RuneSelf {
			return true
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != name[i] {
			return false
		}
	}
	return true
}

func (r *leanReader) skipSpace() {
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

// consume skips white space and then c, if c is next.
func (r *leanReader) consume(c byte) bool {
	r.skipSpace()
	if r.i < len(r.b) && r.b[r.i] == c {
		r.i++
		return true
	}
	return false
}

// end reports whether only white space is left.
func (r *leanReader) end() bool {
	r.skipSpace()
	return r.i == len(r.b)
}

// value reads any JSON value as encoding/json does into an interface{}.
func (r *leanReader) value() (any, bool) {
	r.skipSpace()
	if r.i >= len(r.b) {
		return nil, false
	}
	switch r.b[r.i] {
	case '{':
		if r.depth++; r.depth > maxLeanDepth {
			return nil, false
		}
		r.i++
		m := make(map[string]any, r.hint)
		r.hint = 0
		if r.consume('}') {
			r.depth--
			return m, true
		}
		for {
			k, ok := r.str()
			if !ok || !r.consume(':') {
				return nil, false
			}
			v, ok := r.value()
			if !ok {
				return nil, false
			}
			m[k] = v
			if r.consume(',') {
				continue
			}
			if r.consume('}') {
				r.depth--
				return m, true
			}
			return nil, false
		}
	case '[':
		if r.depth++; r.depth > maxLeanDepth {
			return nil, false
		}
		r.i++
		a := []any{}
		if r.consume(']') {
			r.depth--
			return a, true
		}
		for {
			v, ok := r.value()
			if !ok {
				return nil, false
			}
			a = append(a, v)
			if r.consume(',') {
				continue
			}
			if r.consume(']') {
				r.depth--
				return a, true
			}
			return nil, false
		}
	case '"':
		return r.str()
	case 't':
		return true, r.literal("true")
	case 'f':
		return false, r.literal("false")
	case 'n':
		return nil, r.literal("null")
	default:
		lit, ok := r.number()
		if !ok {
			return nil, false
		}
		f, err := strconv.ParseFloat(lit, 64)
		if err != nil {
			return nil, false
		}
		return f, true
	}
}

func (r *leanReader) literal(word string) bool {
	if len(r.b)-r.i < len(word) || string(r.b[r.i:r.i+len(word)]) != word {
		return false
	}
	r.i += len(word)
	return true
}

// str reads a string without escapes; ok is false for anything else.
func (r *leanReader) str() (string, bool) {
	r.skipSpace()
	if r.i >= len(r.b) || r.b[r.i] != '"' {
		return "", false
	}
	start := r.i + 1
	ascii := true
	for j := start; j < len(r.b); j++ {
		switch c := r.b[j]; {
		case c == '"':
			s := r.b[start:j]
			if !ascii && !utf8.Valid(s) {
				return "", false // encoding/json would substitute U+FFFD
			}
			r.i = j + 1
			if k, ok := commonKeys[string(s)]; ok { // no allocation for the lookup
				return k, true
			}
			return string(s), true
		case c == '\\' || c < 0x20:
			return "", false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return "", false
}

// number reads a number literal that follows the JSON grammar.
func (r *leanReader) number() (string, bool) {
	r.skipSpace()
	b, start := r.b, r.i
	i := start
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	default:
		return "", false
	}
	if i < len(b) && b[i] == '.' {
		i++
		d := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		if i == d {
			return "", false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		if i == d {
			return "", false
		}
	}
	r.i = i
	return string(b[start:i]), true
}
