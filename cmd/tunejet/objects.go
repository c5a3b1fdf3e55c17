package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tunejet/tunejet/tune"
)

// objectFlags is --object NAME=FILE: objects stored for the experiment's
// trials (tune.Put and tune.WithObjects), which a command trainable reads
// with the protocol's get_object. The Python driver passes what
// tunejet.put stored this way.
type objectFlags struct{ specs []string }

func (f *objectFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringArrayVar(&f.specs, "object", nil,
		"store FILE's bytes as object NAME for the trials, which read it with the protocol's get_object (NAME=FILE; repeatable)")
}

// options stores the objects and returns the option that uploads them.
func (f *objectFlags) options(ctx context.Context) ([]tune.Option, error) {
	if len(f.specs) == 0 {
		return nil, nil
	}
	names := make([]string, 0, len(f.specs))
	for _, s := range f.specs {
		name, file, ok := strings.Cut(s, "=")
		if !ok || name == "" || file == "" {
			return nil, fmt.Errorf("--object %q: want NAME=FILE", s)
		}
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("--object %s: %w", name, err)
		}
		if _, err := tune.Put(ctx, name, data); err != nil {
			return nil, fmt.Errorf("--object %s: %w", name, err)
		}
		names = append(names, name)
	}
	return []tune.Option{tune.WithObjects(names...)}, nil
}
