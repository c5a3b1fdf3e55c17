// Package python carries the tunejet Python package (the tunejet folder
// beside this file), so that a runner can put the SDK of its own version on
// the path of a Python trial that cannot import one.
package python

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
)

// The modules by name: a folder pattern would leave out the files whose
// names start with "_", such as __init__.py. TestEveryModuleIsEmbedded
// checks that a new subpackage is listed.
//
//go:embed tunejet/*.py tunejet/tune/*.py tunejet/tune/search/*.py tunejet/air/*.py tunejet/air/integrations/*.py
var files embed.FS

// Package is the Python package: its root holds the tunejet folder.
func Package() fs.FS { return files }

// Hash is a hex digest of the package's paths and contents: the same for
// the same SDK, whatever the binary's build.
func Hash() (string, error) {
	h := sha256.New()
	err := fs.WalkDir(files, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := files.ReadFile(path)
		if err != nil {
			return err
		}
		h.Write([]byte(path))
		h.Write([]byte{0})
		h.Write(b)
		h.Write([]byte{0})
		return nil
	})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
