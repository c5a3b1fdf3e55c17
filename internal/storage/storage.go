// Package storage is where an experiment's results live: path resolution,
// Ray Tune's directory layout and file formats, and safe file writes under
// the experiment directory.
//
// # Layout
//
//	<storage_path>/<name>/
//	    .validate_storage_marker
//	    .tunejet_owner.json                           the deployment that writes it (owner.go)
//	    experiment_state-<YYYY-MM-DD_HH-MM-SS>.json   one per controller run
//	    <trial_dir>/params.json, result.json, progress.csv, error.txt
//
// # Formats
//
// A trial's files are in Ray Tune's formats (results.go): result.json
// holds one JSON object per result, progress.csv one row per result with
// the first result's flattened keys as columns, error.txt one "Failure #
// N" entry per failure, and params.json the trial's config. params.pkl is
// not written: nothing but Python reads a pickle. testdata/ray holds the
// files Ray writes, and the tests read tunejet's files against them.
//
// # Safety
//
// Every relative path is checked to stay inside the experiment directory;
// state files are written to a temporary file and renamed, so they become
// visible only when complete.
package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// MarkerFile is written when an experiment starts; hosts that cannot see it
// do not share the storage.
const MarkerFile = ".validate_storage_marker"

// ErrUnsafePath is wrapped when a relative path would leave its directory.
var ErrUnsafePath = errors.New("path escapes the experiment directory")

// DefaultPath is the storage path when none is given: ~/tunejet_results.
func DefaultPath() string {
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "tunejet_results")
	}
	return filepath.Join(home, "tunejet_results")
}

// IsURL reports whether p is a storage URL (scheme://...).
func IsURL(p string) bool {
	u, err := url.Parse(p)
	return err == nil && len(u.Scheme) > 1 && strings.Contains(p, "://")
}

// Resolve turns a storage_path as written into an absolute path or a URL:
// "" is the default, "~" is the home directory, and a relative path is
// taken relative to baseDir (the experiment file's folder).
func Resolve(p, baseDir string) (string, error) {
	switch {
	case p == "":
		return DefaultPath(), nil
	case IsURL(p):
		return p, nil
	case p == "~" || strings.HasPrefix(p, "~/"):
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("storage_path %q: %w", p, err)
		}
		return filepath.Join(home, p[1:]), nil
	case filepath.IsAbs(p):
		return filepath.Clean(p), nil
	case baseDir == "":
		abs, err := filepath.Abs(p)
		if err != nil {
			return "", fmt.Errorf("storage_path %q: %w", p, err)
		}
		return abs, nil
	default:
		return filepath.Join(baseDir, p), nil
	}
}

// Join appends path elements to a storage path or URL (before its query),
// for showing users where things are.
func Join(storagePath string, elem ...string) string {
	if !IsURL(storagePath) {
		return filepath.Join(append([]string{storagePath}, elem...)...)
	}
	u, err := url.Parse(storagePath)
	if err != nil {
		return storagePath + "/" + path.Join(elem...)
	}
	u.Path = path.Join(append([]string{"/", u.Path}, elem...)...)
	return u.String()
}

// LocalPath returns the directory of a local storage path or file:// URL.
func LocalPath(storagePath string) (string, error) {
	if !IsURL(storagePath) {
		return storagePath, nil
	}
	u, err := url.Parse(storagePath)
	if err != nil {
		return "", fmt.Errorf("storage path %q: %w", storagePath, err)
	}
	if u.Scheme != "file" {
		return "", fmt.Errorf("storage path %q: scheme %q is not supported yet; use a local or NFS path", storagePath, u.Scheme)
	}
	return u.Path, nil
}

// Dir is an experiment directory on a local or shared filesystem.
type Dir struct {
	Root string
}

// Open returns the experiment directory <storagePath>/<name>.
func Open(storagePath, name string) (*Dir, error) {
	base, err := LocalPath(storagePath)
	if err != nil {
		return nil, err
	}
	return &Dir{Root: filepath.Join(base, name)}, nil
}

// Path joins rel to the root, refusing paths that leave it.
func (d *Dir) Path(rel string) (string, error) {
	clean := filepath.Clean(filepath.FromSlash(rel))
	if clean == "." || filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("%w: %q under %s", ErrUnsafePath, rel, d.Root)
	}
	return filepath.Join(d.Root, clean), nil
}

// WriteAtomic writes a file so that readers see either the old content or
// the whole new content: a temporary file in the same folder, synced, then
// renamed over the target.
func (d *Dir) WriteAtomic(rel string, data []byte) error {
	p, err := d.Path(rel)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("write %s: %w", p, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("write %s: %w", p, err)
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("write %s: %w", p, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	return nil
}

// Append adds data at the end of a file, creating it and its folder.
func (d *Dir) Append(rel string, data []byte) error {
	p, err := d.Path(rel)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("append %s: %w", p, err)
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("append %s: %w", p, err)
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return fmt.Errorf("append %s: %w", p, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("append %s: %w", p, err)
	}
	return nil
}

// Read returns a file's content; a missing file wraps fs.ErrNotExist.
func (d *Dir) Read(rel string) ([]byte, error) {
	p, err := d.Path(rel)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	return b, nil
}

// StateFileName is the experiment state file of a controller session.
func StateFileName(session string) string { return "experiment_state-" + session + ".json" }

// NewestState returns the name of the newest experiment_state-*.json (the
// lexicographically greatest, as Ray picks it), or fs.ErrNotExist.
func (d *Dir) NewestState() (string, error) {
	// Not filepath.Glob: the root may hold glob metacharacters ("results[1]").
	entries, err := os.ReadDir(d.Root)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("list %s: %w", d.Root, err)
	}
	newest := ""
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, "experiment_state-") && strings.HasSuffix(n, ".json") && n > newest {
			newest = n
		}
	}
	if newest == "" {
		return "", fmt.Errorf("no experiment_state-*.json in %s: %w", d.Root, fs.ErrNotExist)
	}
	return newest, nil
}
