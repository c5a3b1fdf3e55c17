package tune

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/restore"
	"github.com/tunejet/tunejet/internal/session"
)

// objects are the bytes given to Put, uploaded when an experiment that
// refers to them is submitted or restored.
var objects = struct {
	sync.Mutex
	m map[string][]byte
}{m: map[string][]byte{}}

// Put keeps data under name and returns a reference to use as a
// param_space value (Ray's ray.put). The bytes go to the experiment's
// Object Store when Fit submits or restores an experiment that refers to
// them; a trial reads them with Get. On restore, a param_space that puts
// new references at the same keys gives both existing and future trials
// the new objects.
func Put(ctx context.Context, name string, data []byte) (map[string]any, error) {
	if err := events.ValidateID("object name", name); err != nil {
		return nil, err
	}
	objects.Lock()
	objects.m[name] = append([]byte(nil), data...)
	objects.Unlock()
	return map[string]any{restore.RefKey: name}, nil
}

// Get reads the object a config value refers to, from inside a trial.
func Get(ctx context.Context, ref any) ([]byte, error) {
	name := restore.RefOf(ref)
	if name == "" {
		return nil, fmt.Errorf("tune.Get: %v is not an object reference (use what tune.Put returned)", ref)
	}
	s, err := session.From(ctx)
	if err != nil {
		return nil, err
	}
	return s.Object(ctx, name)
}

// WithObjects makes Fit store the objects put under names (tune.Put) in
// the experiment's Object Store even when the param space does not refer
// to them: a trainable may hold their references itself, as a closure
// holds a Python driver's tunejet.put references.
func WithObjects(names ...string) Option {
	return func(t *Tuner) error {
		objects.Lock()
		defer objects.Unlock()
		for _, name := range names {
			if _, ok := objects.m[name]; !ok {
				return fmt.Errorf("%w: WithObjects(%q): tune.Put stored no object of that name", ErrInvalidConfig, name)
			}
		}
		t.objects = append(t.objects, names...)
		return nil
	}
}

// uploadObjects stores the objects a param space refers to, and those
// named by extra, in the experiment's Object Store.
func uploadObjects(ctx context.Context, b *bus.Bus, exp string, space map[string]any, extra []string) error {
	refs := slices.Compact(slices.Sorted(slices.Values(append(restore.Refs(space), extra...))))
	if len(refs) == 0 {
		return nil
	}
	obs, err := b.Checkpoints(ctx, exp)
	if err != nil {
		return err
	}
	for _, name := range refs {
		objects.Lock()
		data, ok := objects.m[name]
		objects.Unlock()
		if !ok {
			return errors.New("param_space refers to object " + name + ", which tune.Put did not store in this process")
		}
		if _, err := obs.PutBytes(ctx, restore.ObjectName(name), data); err != nil {
			return fmt.Errorf("store object %s: %w", name, err)
		}
	}
	return nil
}
