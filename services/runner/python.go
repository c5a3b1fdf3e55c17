package runner

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/sdk/python"
)

// pythonSDK is the tunejet Python package this runner carries (the one of
// its own version, embedded in the binary). A Python trial whose
// interpreter cannot import a tunejet package of its own gets this one at
// the end of its PYTHONPATH: a runner started without the SDK on its path
// still runs Python trials, and an installed SDK (site-packages, the
// user's PYTHONPATH, a package beside the script) always wins.
type pythonSDK struct {
	root string // the runner's cache of extracted packages
	log  zerolog.Logger

	once sync.Once
	dir  string // the folder holding the extracted tunejet; "" if extraction failed

	mu    sync.Mutex
	known map[string]bool // probe key → the interpreter imports tunejet itself
}

func newPythonSDK(root string, log zerolog.Logger) *pythonSDK {
	return &pythonSDK{root: root, log: log, known: map[string]bool{}}
}

// importProbeTimeout bounds the check of whether an interpreter imports tunejet.
const importProbeTimeout = 30 * time.Second

// probeScript exits 0 when tunejet is importable, without importing it.
const probeScript = "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec('tunejet') else 3)"

// env returns what to add to the environment env of the command args, of
// the experiment folder dir, for it to import tunejet: nothing for a
// command that is not Python or imports a tunejet of its own, else
// PYTHONPATH with the runner's package appended.
func (p *pythonSDK) env(ctx context.Context, args []string, dir string, env []string) []string {
	if p == nil {
		return nil
	}
	interp := pythonInterpreter(args)
	if interp == nil || p.importsOwn(ctx, interp, dir, env) {
		return nil
	}
	sdk := p.extracted()
	if sdk == "" {
		return nil
	}
	path := lookupEnv(env, "PYTHONPATH")
	if path != "" {
		path += string(os.PathListSeparator)
	}
	return []string{"PYTHONPATH=" + path + sdk}
}

// importsOwn reports whether the interpreter finds a tunejet package with
// the trial's environment, probing once per interpreter, folder and
// PYTHONPATH.
func (p *pythonSDK) importsOwn(ctx context.Context, interp []string, dir string, env []string) bool {
	key := strings.Join(interp, "\x00") + "\x00" + dir + "\x00" + lookupEnv(env, "PYTHONPATH")
	p.mu.Lock()
	defer p.mu.Unlock() // one probe at a time: the first answers the others
	if own, ok := p.known[key]; ok {
		return own
	}
	pctx, cancel := context.WithTimeout(ctx, importProbeTimeout)
	defer cancel()
	probe := append(slices.Clip(interp[1:]), "-c", probeScript) // interp may share the trial's arguments
	cmd := exec.CommandContext(pctx, interp[0], probe...)
	cmd.Env = env
	if st, err := os.Stat(dir); err == nil && st.IsDir() {
		cmd.Dir = dir // where the trial's script is: a package beside it counts
	}
	err := cmd.Run()
	if ctx.Err() != nil {
		return true // not known: decide again for the next trial
	}
	own := err == nil
	p.known[key] = own
	if !own {
		p.log.Info().Strs("interpreter", interp).AnErr("probe", err).
			Msg("a Python trainable cannot import tunejet; its trials get the runner's copy at the end of PYTHONPATH")
	}
	return own
}

// extracted is the folder that holds the runner's tunejet package,
// written on first use to <root>/<content hash>; "" when it could not be
// (logged: the trial then runs without it).
func (p *pythonSDK) extracted() string {
	p.once.Do(func() {
		dir, err := extractSDK(p.root)
		if err != nil {
			p.log.Warn().Err(err).Msg("cannot extract the runner's tunejet Python package")
			return
		}
		p.dir = dir
	})
	return p.dir
}

// extractSDK writes the embedded package under root, in a folder named by
// its content hash, and returns that folder. A folder of that name is
// complete: it is renamed into place once written.
func extractSDK(root string) (string, error) {
	hash, err := python.Hash()
	if err != nil {
		return "", fmt.Errorf("python sdk: %w", err)
	}
	dir := filepath.Join(root, hash[:16])
	if _, err := os.Stat(filepath.Join(dir, "tunejet", "__init__.py")); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return "", fmt.Errorf("python sdk: %w", err)
	}
	tmp, err := os.MkdirTemp(root, ".extract-")
	if err != nil {
		return "", fmt.Errorf("python sdk: %w", err)
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	if err := os.CopyFS(tmp, python.Package()); err != nil {
		return "", fmt.Errorf("python sdk: %w", err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", fmt.Errorf("python sdk: %w", err)
	}
	// Another runner sharing root may have put the same folder first.
	if err := os.Rename(tmp, dir); err != nil && !errors.Is(err, fs.ErrExist) && !errors.Is(err, syscall.ENOTEMPTY) {
		return "", fmt.Errorf("python sdk: %w", err)
	}
	return dir, nil
}

// pythonName matches the names of Python interpreters: python,
// python3, python3.12.
var pythonName = regexp.MustCompile(`^python[0-9.]*$`)

// pythonInterpreter is the interpreter (with its leading arguments) that
// runs the command args, or nil when it is not a Python program: a
// program named like a Python interpreter, or a script whose #! line names
// one.
func pythonInterpreter(args []string) []string {
	if len(args) == 0 {
		return nil
	}
	if pythonName.MatchString(filepath.Base(args[0])) {
		return args[:1]
	}
	if !strings.Contains(args[0], "/") {
		return nil
	}
	f, err := os.Open(args[0])
	if err != nil {
		return nil
	}
	defer func() { _ = f.Close() }()
	line, _ := bufio.NewReader(io.LimitReader(f, 512)).ReadString('\n')
	rest, ok := strings.CutPrefix(line, "#!")
	if !ok {
		return nil
	}
	fields := strings.Fields(rest)
	for i, f := range fields {
		if pythonName.MatchString(filepath.Base(f)) {
			return fields[:i+1]
		}
	}
	return nil
}

// lookupEnv is the last value of key in env, as exec uses it, or "".
func lookupEnv(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}
