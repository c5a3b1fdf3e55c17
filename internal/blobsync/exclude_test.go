package blobsync

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMatchIsPythonFnmatch(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"*_exclude*", "subdir/level1_exclude.txt", true},
		{"*_exclude*", "subdir/nested/level2.txt", false},
		{"*.txt", "a/b/c.txt", true}, // * crosses /
		{"*", "", true},
		{"**", "a/b", true},
		{"*", "a\nb", true},
		{"?", "/", true},
		{"?", "", false},
		{"a?c", "abc", true},
		{"a.c", "abc", false}, // . is literal
		{"[abc]", "b", true},
		{"[abc]", "d", false},
		{"[!abc]", "b", false},
		{"[!abc]", "d", true},
		{"[a-c]x", "bx", true},
		{"[a-c]x", "dx", false},
		{"[-a]", "-", true},
		{"[a-]", "-", true},
		{"[z-a]", "z", false}, // reversed range matches nothing
		{"[!z-a]", "q", true},
		{"[]]", "]", true},
		{"[!]]", "]", false},
		{"[!]]", "a", true},
		{"[", "[", true}, // unclosed: literal
		{"a[b", "a[b", true},
		{"[\\]", "\\", true},
		{"\\*", "\\x", true}, // backslash is not an escape
		{"[^a]", "^", true},  // ^ is not negation
		{"[^a]", "b", false},
		{"a+b(c)|{d}$", "a+b(c)|{d}$", true},
		{"日本*", "日本語", true},
		{"[日本]", "本", true},
		{"*.[ch]", "x.h", true},
		{"ABC", "abc", false}, // case-sensitive, as fnmatch on POSIX
	}
	for _, tc := range tests {
		if got := Match(tc.pattern, tc.name); got != tc.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tc.pattern, tc.name, got, tc.want)
		}
	}
}

// rayTree builds the tree of Ray's test_sync_up_exclude under a temp dir.
func rayTree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{
		"level0.txt", "level0_exclude.txt",
		"subdir/level1.txt", "subdir/level1_exclude.txt",
		"subdir/nested/level2.txt", "subdir_nested_level2_exclude.txt",
		"subdir_exclude/something/somewhere.txt",
	} {
		p := filepath.Join(dir, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLocalFilesExclude(t *testing.T) {
	dir := rayTree(t)
	all := []string{
		"level0.txt", "level0_exclude.txt", "subdir/level1.txt", "subdir/level1_exclude.txt",
		"subdir/nested/level2.txt", "subdir_exclude/something/somewhere.txt", "subdir_nested_level2_exclude.txt",
	}
	kept := []string{"level0.txt", "subdir/level1.txt", "subdir/nested/level2.txt"}
	tests := []struct {
		name    string
		exclude []string
		want    []string
	}{
		{"none", nil, all},
		{"Ray's *_exclude*", []string{"*_exclude*"}, kept},
		{"a directory with a trailing slash", []string{"subdir_exclude/"}, slices.DeleteFunc(slices.Clone(all), func(s string) bool {
			return s == "subdir_exclude/something/somewhere.txt"
		})},
		{"a directory without the slash", []string{"subdir"}, slices.DeleteFunc(slices.Clone(all), func(s string) bool {
			return s == "subdir/level1.txt" || s == "subdir/level1_exclude.txt" || s == "subdir/nested/level2.txt"
		})},
		{"a nested directory", []string{"*/nested/"}, slices.DeleteFunc(slices.Clone(all), func(s string) bool {
			return s == "subdir/nested/level2.txt"
		})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := localFiles(dir, newExcluder(tc.exclude))
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("files (-want +got):\n%s", diff)
			}
		})
	}
}

func TestExcludedPathChecksParentDirectories(t *testing.T) {
	ex := newExcluder([]string{"skip/"})
	for key, want := range map[string]bool{
		"skip/a.txt":   true,
		"skip/b/c.txt": true,
		"skip/":        true,
		"keep/skip":    false,
		"skipper/a":    false,
	} {
		if got := ex.excludedPath(key); got != want {
			t.Errorf("excludedPath(%q) = %v, want %v", key, got, want)
		}
	}
}
