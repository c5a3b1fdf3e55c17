// Package ckpttest builds and reads checkpoint directories for the tests
// of both checkpoint transports: the Object Store (internal/ckpt) and
// direct writes to storage (internal/ckpt/direct).
package ckpttest

import (
	"crypto/rand"
	"crypto/sha256"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// Random returns n random bytes.
func Random(t testing.TB, n int) []byte {
	t.Helper()
	data := make([]byte, n)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	return data
}

// Tree describes a directory: file contents by relative path; a path
// ending in "/" is a directory.
type Tree map[string][]byte

// Write creates tr under dir.
func Write(t testing.TB, dir string, tr Tree) {
	t.Helper()
	for p, data := range tr {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if p[len(p)-1] == '/' {
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Read returns the tree under dir, with a sha256 per file; a folder's
// path ends in "/" and has a zero sum.
func Read(t testing.TB, dir string) map[string][32]byte {
	t.Helper()
	out := map[string][32]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			out[filepath.ToSlash(rel)+"/"] = [32]byte{}
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			return err
		}
		var sum [32]byte
		copy(sum[:], h.Sum(nil))
		out[filepath.ToSlash(rel)] = sum
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
