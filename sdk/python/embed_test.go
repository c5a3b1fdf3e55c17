package python

import (
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryModuleIsEmbedded: the package a runner carries holds every
// module of the tunejet folder, and nothing else.
func TestEveryModuleIsEmbedded(t *testing.T) {
	want := map[string]bool{}
	err := filepath.WalkDir("tunejet", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".py") {
			want[filepath.ToSlash(path)] = true
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	err = fs.WalkDir(Package(), ".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			got[path] = true
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for p := range want {
		if !got[p] {
			t.Errorf("%s is not embedded: add its folder to the go:embed line of embed.go", p)
		}
	}
	for p := range got {
		if !want[p] {
			t.Errorf("%s is embedded but not a module of the tunejet folder", p)
		}
	}
	if !got["tunejet/__init__.py"] || !got["tunejet/_worker.py"] {
		t.Errorf("the package lacks __init__.py or _worker.py: %v", got)
	}
}

func TestHashIsStable(t *testing.T) {
	a, err := Hash()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Hash()
	if a != b || len(a) != 64 {
		t.Errorf("Hash = %q then %q", a, b)
	}
}
