package tuner

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/tunejet/tunejet/internal/sched"
	"github.com/tunejet/tunejet/internal/search"
	"github.com/tunejet/tunejet/internal/stopper"
)

// ErrInvalid is what every *KeyError wraps.
var ErrInvalid = errors.New("invalid tuner settings")

// KeyError is one problem with the tuner's settings, at the dotted key of
// the experiment file that holds it, e.g. "tune_config.scheduler.max_t".
type KeyError struct {
	// Key is the dotted key, e.g. "tune_config.search_alg.gamma".
	Key string
	// Msg says what is wrong, e.g. "must be > 0, got -1".
	Msg string
}

// Error returns "<key>: <msg>".
func (e *KeyError) Error() string { return e.Key + ": " + e.Msg }

// Unwrap returns ErrInvalid.
func (e *KeyError) Unwrap() error { return ErrInvalid }

// Keys for the settings, as the experiment file spells them.
const (
	keySearchAlg = "tune_config.search_alg"
	keyScheduler = "tune_config.scheduler"
	keyPoints    = keySearchAlg + ".points_to_evaluate"
	keyStoppers  = "run_config.stoppers"
	keyMetric    = "tune_config.metric"
	keyMode      = "tune_config.mode"
)

// problems collects KeyErrors, one per key: the first problem at a key
// hides later ones, which usually follow from it.
type problems struct {
	errs []*KeyError
	seen map[string]bool
}

func (p *problems) add(key, format string, args ...any) {
	if p.seen[key] {
		return
	}
	p.hide(key)
	p.errs = append(p.errs, &KeyError{Key: key, Msg: fmt.Sprintf(format, args...)})
}

// hide keeps later problems at key from being added: they follow from one
// found below it.
func (p *problems) hide(key string) {
	if p.seen == nil {
		p.seen = map[string]bool{}
	}
	p.seen[key] = true
}

// addErr adds the problems in err: the KeyErrors of this package, of
// internal/stopper and internal/search (at param_space's keys), and the
// ConfigErrors of internal/sched under prefix. Anything else is a problem
// at prefix.
func (p *problems) addErr(prefix string, err error) {
	if err == nil {
		return
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			p.addErr(prefix, e)
		}
		return
	}
	var (
		ke  *KeyError
		ske *stopper.KeyError
		pke *search.KeyError
		ce  *sched.ConfigError
	)
	switch {
	case errors.As(err, &ke):
		p.add(ke.Key, "%s", ke.Msg)
	case errors.As(err, &ske):
		p.add(ske.Key, "%s", ske.Msg)
	case errors.As(err, &pke):
		p.add(strings.Join(append([]string{prefix}, pke.Path...), "."), "%s", pke.Msg)
	case errors.As(err, &ce):
		p.add(prefix+"."+ce.Key, "%s", ce.Msg)
	default:
		p.add(prefix, "%s", err.Error())
	}
}

// err returns the problems joined, or nil.
func (p *problems) err() error {
	errs := make([]error, len(p.errs))
	for i, e := range p.errs {
		errs[i] = e
	}
	return errors.Join(errs...)
}

// settings reads a mapping of settings by name, as a YAML or JSON decoder
// yields it: each key is taken by one of the readers, a null value keeps
// the default, and a key no reader takes is refused with the closest known
// name.
type settings struct {
	prefix string // the dotted key of the mapping
	name   string // what takes the settings, e.g. "asha"
	p      *problems
}

// reader reads one setting's value; it reports a problem at key when the
// value has the wrong type.
type reader func(key string, v any)

func (s settings) key(k string) string { return s.prefix + "." + k }

// read calls the reader of each key of m, in sorted order.
func (s settings) read(m map[string]any, readers map[string]reader) {
	known := slices.Sorted(maps.Keys(readers))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		read, ok := readers[k]
		switch {
		case !ok:
			s.unknown(k, known)
		case m[k] != nil:
			read(s.key(k), m[k])
		}
	}
}

func (s settings) unknown(k string, known []string) {
	if sug := search.Suggest(k, known); sug != "" {
		s.p.add(s.key(k), "unknown key, did you mean %q?", sug)
		return
	}
	if len(known) == 0 {
		s.p.add(s.key(k), "unknown key; %q takes no settings", s.name)
		return
	}
	s.p.add(s.key(k), "unknown key; valid keys: %s", strings.Join(known, ", "))
}

func (s settings) str(p *string) reader {
	return func(key string, v any) {
		if x, ok := v.(string); ok {
			*p = x
			return
		}
		s.p.add(key, "expected a string, got %s", describe(v))
	}
}

func (s settings) boolean(p *bool) reader {
	return func(key string, v any) {
		if x, ok := v.(bool); ok {
			*p = x
			return
		}
		s.p.add(key, "expected a boolean, got %s", describe(v))
	}
}

func (s settings) number(p *float64) reader {
	return func(key string, v any) {
		if x, ok := toFloat(v); ok {
			*p = x
			return
		}
		s.p.add(key, "expected a finite number, got %s", describe(v))
	}
}

func (s settings) integer(p *int) reader {
	return func(key string, v any) {
		if x, ok := toInt(v); ok {
			*p = x
			return
		}
		s.p.add(key, "expected an integer, got %s", describe(v))
	}
}

func (s settings) numbers(p *[]float64) reader {
	return func(key string, v any) {
		l, ok := v.([]any)
		if !ok {
			s.p.add(key, "expected a list of numbers, got %s", describe(v))
			return
		}
		out := make([]float64, len(l))
		for i, e := range l {
			if out[i], ok = toFloat(e); !ok {
				s.p.add(key+"."+strconv.Itoa(i), "expected a finite number, got %s", describe(e))
				return
			}
		}
		*p = out
	}
}

// toFloat reads a finite number: search.Number, but NaN and infinities,
// which it lets through, are refused, as a setting must be a number JSON
// can hold.
func toFloat(v any) (float64, bool) {
	f, _, ok := search.Number(v)
	return f, ok && !math.IsNaN(f) && !math.IsInf(f, 0)
}

// toInt reads an integer: an int, or a number with an integral value (a
// JSON decoder gives 10 as float64).
func toInt(v any) (int, bool) {
	if x, ok := v.(int); ok {
		return x, true
	}
	f, ok := toFloat(v)
	if !ok || f != math.Trunc(f) || math.Abs(f) >= 1<<53 {
		return 0, false
	}
	return int(f), true
}

// describe names a decoded value's type and value for messages.
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return strconv.Quote(x)
	case bool:
		return "boolean " + strconv.FormatBool(x)
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	}
	if f, ok := toFloat(v); ok {
		return "number " + strconv.FormatFloat(f, 'g', -1, 64)
	}
	return fmt.Sprintf("%T %v", v, v)
}
