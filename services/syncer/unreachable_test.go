package syncer_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/storage/storagetest"
	"github.com/tunejet/tunejet/services/syncer"
)

// lockedLog collects a logger's JSON lines while the test reads them.
type lockedLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedLog) lines(t *testing.T) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// TestUnreachableStorageIsLoggedOncePerBackoffStep: a syncer that cannot
// open an experiment's bucket (it does not exist) logs each failed
// attempt once, at warn, with the attempt, the wait before the next, and
// why in one line; it logs no error, and nothing when it stops. The log
// of the experiment holds one sync.failed per attempt.
func TestUnreachableStorageIsLoggedOncePerBackoffStep(t *testing.T) {
	srv := bustest.Start(t)
	s := beginAt(t, srv, storagetest.S3WithoutBucket(t))
	logs := &lockedLog{}
	b := srv.Bus("syncer")
	b.Log = zerolog.New(logs)
	stop := runSyncerOn(t, b, syncer.Config{})
	failed := func() int {
		n := 0
		for _, ev := range bustest.Log(t, s.b, exp) {
			if f, ok := ev.Data.(*events.SyncFailed); ok && f.Operation == "open storage" {
				n++
			}
		}
		return n
	}
	bustest.Eventually(t, wait, "two failed attempts to open the storage", func() bool { return failed() >= 2 })
	stop()

	var warned []map[string]any
	for _, m := range logs.lines(t) {
		if m["experiment"] != exp {
			continue
		}
		if m["level"] != "warn" {
			t.Errorf("logged at %v: %v", m["level"], m)
			continue
		}
		warned = append(warned, m)
	}
	if n := failed(); len(warned) != n {
		t.Fatalf("%d warnings for %d failed attempts, want one each:\n%v", len(warned), n, warned)
	}
	for i, m := range warned {
		msg, _ := m["error"].(string)
		if m["attempt"] != float64(i+1) || m["next_try_in"] == nil || !strings.Contains(msg, ": no such bucket (") || strings.Contains(msg, "\n") {
			t.Errorf("warning %d: %v; want attempt %d, next_try_in, and one line saying no such bucket", i, m, i+1)
		}
	}
}

// TestForgottenExperimentIsNoLongerTried: a syncer trying again to open an
// experiment's bucket stops once the experiment is removed from the log
// (bus.Forget, as tunejet forget does), saying so once.
func TestForgottenExperimentIsNoLongerTried(t *testing.T) {
	srv := bustest.Start(t)
	s := beginAt(t, srv, storagetest.S3WithoutBucket(t))
	logs := &lockedLog{}
	b := srv.Bus("syncer")
	b.Log = zerolog.New(logs)
	runSyncerOn(t, b, syncer.Config{})
	bustest.Eventually(t, wait, "a failed attempt to open the storage", func() bool {
		return slices.ContainsFunc(bustest.Log(t, s.b, exp), syncFailedFor("open storage", "NoSuchBucket"))
	})
	if _, err := s.b.Forget(t.Context(), exp); err != nil {
		t.Fatal(err)
	}
	bustest.Eventually(t, wait, "the syncer to stop trying", func() bool {
		for _, m := range logs.lines(t) {
			if m["experiment"] == exp && strings.Contains(fmt.Sprint(m["message"]), "removed from the event log") {
				return true
			}
		}
		return false
	})
}
