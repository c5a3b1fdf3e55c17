package storage

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	base := t.TempDir()
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		path    string
		baseDir string
		want    string
	}{
		{"empty is the default", "", base, filepath.Join(home, "tunejet_results")},
		{"tilde is home", "~", base, home},
		{"tilde slash is under home", "~/results/x", base, filepath.Join(home, "results", "x")},
		{"relative is against baseDir", "results", base, filepath.Join(base, "results")},
		{"relative with dots is cleaned", "a/../results", base, filepath.Join(base, "results")},
		{"relative without baseDir is against the working dir", "results", "", filepath.Join(cwd, "results")},
		{"absolute is cleaned", "/srv//results/./x/", base, "/srv/results/x"},
		{"file URL passes through", "file:///srv/results", base, "file:///srv/results"},
		{"s3 URL passes through", "s3://bucket/prefix?region=eu-west-1&endpoint=http://minio:9000", base, "s3://bucket/prefix?region=eu-west-1&endpoint=http://minio:9000"},
		{"mem URL passes through", "mem://", base, "mem://"},
		{"tilde user is a relative name", "~bob/x", base, filepath.Join(base, "~bob", "x")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Resolve(tc.path, tc.baseDir)
			if err != nil {
				t.Fatalf("Resolve(%q, %q): %v", tc.path, tc.baseDir, err)
			}
			if got != tc.want {
				t.Fatalf("Resolve(%q, %q) = %q, want %q", tc.path, tc.baseDir, got, tc.want)
			}
		})
	}
}

func TestPath(t *testing.T) {
	d := &Dir{Root: t.TempDir()}
	tests := []struct {
		rel  string
		want string // "" means refused
	}{
		{"params.json", "params.json"},
		{"trial_0/result.json", "trial_0/result.json"},
		{"trial_0/./a/../result.json", "trial_0/result.json"},
		{"..", ""},
		{"../x", ""},
		{"a/../../b", ""},
		{"a/b/../../../c", ""},
		{"/etc/passwd", ""},
		{"//x", ""},
		{"..hidden", "..hidden"}, // a name that starts with dots is not a parent
		{"a/..b", "a/..b"},
	}
	for _, tc := range tests {
		t.Run(tc.rel, func(t *testing.T) {
			got, err := d.Path(tc.rel)
			if tc.want == "" {
				if !errors.Is(err, ErrUnsafePath) {
					t.Fatalf("Path(%q) = %q, %v; want an error wrapping ErrUnsafePath", tc.rel, got, err)
				}
				if !strings.Contains(err.Error(), tc.rel) {
					t.Fatalf("Path(%q): error %q does not name the path", tc.rel, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Path(%q): %v", tc.rel, err)
			}
			if want := filepath.Join(d.Root, filepath.FromSlash(tc.want)); got != want {
				t.Fatalf("Path(%q) = %q, want %q", tc.rel, got, want)
			}
		})
	}
}

func TestWriteAtomic(t *testing.T) {
	d := &Dir{Root: filepath.Join(t.TempDir(), "exp")}
	if err := d.WriteAtomic("trial/params.json", []byte("old")); err != nil {
		t.Fatal(err)
	}
	if err := d.WriteAtomic("trial/params.json", []byte(`{"lr":0.1}`)); err != nil {
		t.Fatal(err)
	}
	got, err := d.Read("trial/params.json")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != `{"lr":0.1}` {
		t.Fatalf("content = %q, want the second write", got)
	}
	entries, err := os.ReadDir(filepath.Join(d.Root, "trial"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "params.json" {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("trial dir holds %v, want only params.json (no temporary file left)", names)
	}
	fi, err := os.Stat(filepath.Join(d.Root, "trial", "params.json"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o644 {
		t.Fatalf("mode = %v, want 0644", fi.Mode().Perm())
	}
}

func TestWriteAtomicRefusesEscape(t *testing.T) {
	parent := t.TempDir()
	d := &Dir{Root: filepath.Join(parent, "exp")}
	if err := d.WriteAtomic("../outside.json", []byte("x")); !errors.Is(err, ErrUnsafePath) {
		t.Fatalf("WriteAtomic(../outside.json) = %v, want ErrUnsafePath", err)
	}
	if _, err := os.Stat(filepath.Join(parent, "outside.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a file was written outside the experiment dir (stat: %v)", err)
	}
}

func TestAppend(t *testing.T) {
	d := &Dir{Root: filepath.Join(t.TempDir(), "exp")}
	for _, line := range []string{"a\n", "b\n", "c\n"} {
		if err := d.Append("trial/result.json", []byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := d.Read("trial/result.json")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "a\nb\nc\n" {
		t.Fatalf("content = %q, want the three lines in order", got)
	}
	if err := d.Append("../x", []byte("x")); !errors.Is(err, ErrUnsafePath) {
		t.Fatalf("Append(../x) = %v, want ErrUnsafePath", err)
	}
}

func TestReadMissing(t *testing.T) {
	d := &Dir{Root: t.TempDir()}
	if _, err := d.Read("nope.json"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Read of a missing file = %v, want fs.ErrNotExist", err)
	}
}

func TestNewestState(t *testing.T) {
	// The parent holds glob metacharacters: a storage path may contain them.
	d := &Dir{Root: filepath.Join(t.TempDir(), "results[v2]*?", "exp")}
	_, err := d.NewestState()
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "experiment_state-*.json") {
		t.Fatalf("NewestState of a missing dir = %v, want fs.ErrNotExist naming experiment_state-*.json", err)
	}
	if err := os.MkdirAll(d.Root, 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = d.NewestState()
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), d.Root) {
		t.Fatalf("NewestState of an empty dir = %v, want fs.ErrNotExist naming %s", err, d.Root)
	}
	for _, name := range []string{
		StateFileName("2026-01-02_03-04-05"),
		StateFileName("2026-11-02_03-04-05"),
		StateFileName("2026-02-02_03-04-05"),
		".experiment_state-2027-01-01_00-00-00.json.tmp-123", // a write in progress
		"experiment_state-2027-01-01_00-00-00.json.bak",
		"params.json",
	} {
		if err := d.WriteAtomic(name, []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	got, err := d.NewestState()
	if err != nil {
		t.Fatal(err)
	}
	if want := "experiment_state-2026-11-02_03-04-05.json"; got != want {
		t.Fatalf("NewestState = %q, want %q", got, want)
	}
}

func TestLocalPath(t *testing.T) {
	tests := []struct {
		in, want, err string
	}{
		{in: "/srv/results", want: "/srv/results"},
		{in: "file:///srv/results", want: "/srv/results"},
		{in: "file:///srv/with%20space", want: "/srv/with space"},
		{in: "s3://bucket/prefix", err: `scheme "s3" is not supported`},
		{in: "gs://bucket", err: `scheme "gs" is not supported`},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := LocalPath(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), tc.in) {
					t.Fatalf("LocalPath(%q) = %q, %v; want an error naming the path and containing %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("LocalPath(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestOpen(t *testing.T) {
	d, err := Open("file:///srv/results", "exp")
	if err != nil || d.Root != "/srv/results/exp" {
		t.Fatalf("Open = %+v, %v; want root /srv/results/exp", d, err)
	}
	if _, err := Open("s3://bucket", "exp"); err == nil {
		t.Fatal("Open(s3://bucket) succeeded, want an error until blob storage is supported")
	}
}
