package runner

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestPythonInterpreter(t *testing.T) {
	dir := t.TempDir()
	script := func(name, first string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(first+"\nprint(1)\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"python3", "train.py"}, []string{"python3"}},
		{[]string{"/usr/bin/python3.12", "-m", "tunejet._worker"}, []string{"/usr/bin/python3.12"}},
		{[]string{"python", "-c", "pass"}, []string{"python"}},
		{[]string{script("env.py", "#!/usr/bin/env python3")}, []string{"/usr/bin/env", "python3"}},
		{[]string{script("direct.py", "#!/opt/py/bin/python3 -u")}, []string{"/opt/py/bin/python3"}},
		{[]string{script("train.sh", "#!/bin/sh")}, nil},
		{[]string{script("nobang.py", "import tunejet")}, nil},
		{[]string{"/bin/sh", "-c", "python3 train.py"}, nil},
		{[]string{"pythonic"}, nil},
		{[]string{"./missing.py"}, nil},
	}
	for _, tt := range tests {
		if got := pythonInterpreter(tt.args); !slices.Equal(got, tt.want) {
			t.Errorf("pythonInterpreter(%q) = %q, want %q", tt.args, got, tt.want)
		}
	}
}

// A Python trial imports the tunejet package its own path holds when it
// has one, and the runner's copy otherwise.
func TestPythonTrialGetsTheRunnersSDKOnlyWithoutItsOwn(t *testing.T) {
	own := t.TempDir()
	if err := os.MkdirAll(filepath.Join(own, "tunejet"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(own, "tunejet", "__init__.py"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	sdk := newPythonSDK(cache, testLog(t))
	where := func(pythonPath string) string {
		t.Helper()
		t.Setenv("PYTHONPATH", pythonPath)
		t.Setenv("PYTHONDONTWRITEBYTECODE", "1")
		r := newRecorder(t, "")
		e := &commandExecutor{
			Command: []string{"python3", "-c", "import tunejet; open('where.txt', 'w').write(tunejet.__file__)"},
			Sockets: t.TempDir(), Grace: testGrace, Log: testLog(t), SDK: sdk,
		}
		if err := r.run(t, e); err != nil {
			t.Fatalf("PYTHONPATH=%s: %v", pythonPath, err)
		}
		b, err := os.ReadFile(filepath.Join(r.info.TrialDir, "where.txt"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got := where(own); got != filepath.Join(own, "tunejet", "__init__.py") {
		t.Errorf("with its own package on PYTHONPATH the trial imported %s", got)
	}
	if got := where(t.TempDir()); !strings.HasPrefix(got, cache+string(os.PathSeparator)) {
		t.Errorf("without a package of its own the trial imported %s, want the runner's copy under %s", got, cache)
	}
	if _, err := os.Stat(filepath.Join(sdk.extracted(), "tunejet", "_worker.py")); err != nil {
		t.Errorf("the runner's copy lacks _worker.py: %v", err)
	}
}
