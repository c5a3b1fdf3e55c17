package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tunejet/tunejet/internal/storage/storagetest"
)

// buildTunejet builds the tunejet binary (go build ./cmd/tunejet) once per
// run of the benchmarks and returns its path.
func buildTunejet(b *testing.B) string { return buildCommand(b, "./cmd/tunejet") }

// builds holds the binaries built by buildCommand, in one folder that
// TestMain removes: a link of tunejet takes seconds, and every process
// benchmark needs it.
var builds struct {
	sync.Mutex
	dir  string
	bins map[string]string
}

func TestMain(m *testing.M) {
	code := m.Run()
	if builds.dir != "" {
		_ = os.RemoveAll(builds.dir)
	}
	os.Exit(code)
}

// buildCommand builds the module's main package pkg, once per run of the
// benchmarks, and returns the binary's path.
func buildCommand(b *testing.B, pkg string) string {
	b.Helper()
	builds.Lock()
	defer builds.Unlock()
	if bin, ok := builds.bins[pkg]; ok {
		return bin
	}
	out, err := exec.Command("go", "env", "GOMOD").Output()
	mod := strings.TrimSpace(string(out))
	if err != nil || mod == "" || mod == os.DevNull {
		b.Fatalf("cannot find the module root (go env GOMOD: %q): %v", mod, err)
	}
	if builds.dir == "" {
		if builds.dir, err = os.MkdirTemp("", "tunejet-bench-bin-"); err != nil {
			b.Fatal(err)
		}
		builds.bins = map[string]string{}
	}
	bin := filepath.Join(builds.dir, filepath.Base(pkg))
	build := exec.Command("go", "build", "-o", bin, pkg)
	build.Dir = filepath.Dir(mod)
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	builds.bins[pkg] = bin
	return bin
}

// startFakeS3 runs bench/fakes3 (gofakes3's in-memory S3) as its own
// process until the benchmark ends, and returns the storage URL of its
// bucket with the AWS environment set as storagetest.S3 does.
func startFakeS3(b *testing.B) string {
	b.Helper()
	cmd := exec.Command(buildCommand(b, "./bench/fakes3"), storagetest.BucketName)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		b.Fatalf("fakes3 did not print its address: %v", err)
	}
	return storagetest.S3At(b, "http://"+strings.TrimSpace(addr))
}

// cleanEnv is the environment without NATS_* and TUNEJET_* variables, plus
// extra.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		key, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(key, "NATS_") || strings.HasPrefix(key, "TUNEJET_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// proc is a tunejet process started by a benchmark. Its output goes to
// files in the benchmark's temp dir, shown when something goes wrong.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error
}

// startProc starts bin with args; the process is killed when the
// benchmark ends if it is still running.
func startProc(b *testing.B, bin string, env []string, name string, args ...string) *proc {
	b.Helper()
	p := &proc{name: name, done: make(chan struct{}), logPath: filepath.Join(b.TempDir(), name+".log")}
	f, err := os.Create(p.logPath)
	if err != nil {
		b.Fatal(err)
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = f, f
	if err := p.cmd.Start(); err != nil {
		_ = f.Close()
		b.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		_ = f.Close()
		close(p.done)
	}()
	b.Cleanup(p.kill)
	return p
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// tail is the end of the process's output.
func (p *proc) tail(n int) string {
	data, _ := os.ReadFile(p.logPath)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// waitUntil polls cond every 10 ms until it holds, ctx ends or within
// passes; it reports whether cond held.
func waitUntil(ctx context.Context, within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// distribution summarizes durations: min, median, p90, max.
type distribution struct {
	sorted []time.Duration
}

func newDistribution(ds []time.Duration) distribution {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return distribution{sorted: s}
}

// quantile is the nearest-rank quantile q in [0, 1].
func (d distribution) quantile(q float64) time.Duration {
	if len(d.sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(d.sorted))+0.999999) - 1
	return d.sorted[min(max(i, 0), len(d.sorted)-1)]
}

func (d distribution) min() time.Duration    { return d.quantile(0) }
func (d distribution) median() time.Duration { return d.quantile(0.5) }
func (d distribution) p90() time.Duration    { return d.quantile(0.9) }
func (d distribution) max() time.Duration    { return d.quantile(1) }

// report records the distribution's min, median, p90 and max in seconds.
func (d distribution) report(b *testing.B) {
	b.ReportMetric(d.min().Seconds(), "min_s")
	b.ReportMetric(d.median().Seconds(), "median_s")
	b.ReportMetric(d.p90().Seconds(), "p90_s")
	b.ReportMetric(d.max().Seconds(), "max_s")
}

func (d distribution) String() string {
	return fmt.Sprintf("min %v, median %v, p90 %v, max %v (n=%d)",
		d.min().Round(time.Millisecond), d.median().Round(time.Millisecond),
		d.p90().Round(time.Millisecond), d.max().Round(time.Millisecond), len(d.sorted))
}

// histogram counts the durations in buckets of width w, on one line.
func (d distribution) histogram(w time.Duration) string {
	if len(d.sorted) == 0 {
		return ""
	}
	counts := map[int]int{}
	lo, hi := int(d.min()/w), int(d.max()/w)
	for _, v := range d.sorted {
		counts[int(v/w)]++
	}
	var parts []string
	for k := lo; k <= hi; k++ {
		parts = append(parts, fmt.Sprintf("[%.2f,%.2f)s:%d", (time.Duration(k)*w).Seconds(), (time.Duration(k+1)*w).Seconds(), counts[k]))
	}
	return strings.Join(parts, " ")
}
