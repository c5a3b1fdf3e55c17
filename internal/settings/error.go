package settings

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrInvalid matches every *Error with errors.Is.
var ErrInvalid = errors.New("invalid settings")

// Error is one problem with a setting.
type Error struct {
	File string // the experiment file; empty when the settings came from elsewhere
	Line int    // 1-based; 0 when unknown
	Key  string // dotted key path, e.g. "tune_config.scheduler.max_t"; empty for the whole file
	Msg  string // what is wrong, e.g. "must be > 0, got -1"
}

// Error returns "<file>:<line>: <key>: <message>", leaving out what is
// unknown.
func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			b.WriteString(":" + strconv.Itoa(e.Line))
		}
		b.WriteString(": ")
	}
	if e.Key != "" {
		b.WriteString(e.Key + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Is reports whether target is ErrInvalid.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// errorsIn returns the *Errors in err, which may join them, in order; an
// error of another kind is returned as one at no key.
func errorsIn(err error) []*Error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []*Error
		for _, e := range j.Unwrap() {
			out = append(out, errorsIn(e)...)
		}
		return out
	}
	var e *Error
	if errors.As(err, &e) {
		return []*Error{e}
	}
	return []*Error{{Msg: err.Error()}}
}

// Join appends the dotted key k to key.
func Join(key, k string) string {
	switch {
	case k == "":
		return key
	case key == "":
		return k
	}
	return key + "." + k
}

// Problems collects Errors under a key, one per key. The zero value
// collects at the top; Under gives a view at a key below that adds to the
// same collection.
type Problems struct {
	prefix string
	all    *collection
}

type collection struct {
	errs []*Error
	seen map[string]bool
}

func (p *Problems) init() *collection {
	if p.all == nil {
		p.all = &collection{seen: map[string]bool{}}
	}
	return p.all
}

// Under returns the problems at key k below p's, sharing p's collection.
func (p *Problems) Under(k string) *Problems {
	return &Problems{prefix: p.Key(k), all: p.init()}
}

// Key returns the full dotted key of k.
func (p *Problems) Key(k string) string { return Join(p.prefix, k) }

// Add records a problem at k, unless k has one already.
func (p *Problems) Add(k, format string, args ...any) {
	key := p.Key(k)
	c := p.init()
	if c.seen[key] {
		return
	}
	c.seen[key] = true
	c.errs = append(c.errs, &Error{Key: key, Msg: fmt.Sprintf(format, args...)})
}

// Check records a problem at k when ok is false.
func (p *Problems) Check(ok bool, k, format string, args ...any) {
	if !ok {
		p.Add(k, format, args...)
	}
}

// Hide keeps later problems at k from being recorded: they follow from
// one already found.
func (p *Problems) Hide(k string) { p.init().seen[p.Key(k)] = true }

// Has reports whether k has a problem, or is hidden.
func (p *Problems) Has(k string) bool { return p.init().seen[p.Key(k)] }

// AddErr records the problems of err at k: each *Error in it at its key
// below k, anything else at k.
func (p *Problems) AddErr(k string, err error) {
	for _, e := range errorsIn(err) {
		p.Add(Join(k, e.Key), "%s", e.Msg)
	}
}

// Len is how many problems were recorded, in every view.
func (p *Problems) Len() int { return len(p.init().errs) }

// List returns the problems, in the order found.
func (p *Problems) List() []*Error { return p.init().errs }

// Err returns the problems joined with errors.Join, or nil.
func (p *Problems) Err() error {
	errs := make([]error, len(p.List()))
	for i, e := range p.List() {
		errs[i] = e
	}
	return errors.Join(errs...)
}

// Prefix returns err with the key of each *Error in it put below k, as
// AddErr records them: a package reports keys relative to what it reads,
// and its caller roots them ("param_space").
func Prefix(k string, err error) error {
	if err == nil {
		return nil
	}
	var p Problems
	p.AddErr(k, err)
	return p.Err()
}
