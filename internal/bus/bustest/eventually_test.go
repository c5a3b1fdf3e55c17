package bustest_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tunejet/tunejet/internal/bus/bustest"
)

// fatal is a test that records its failure instead of failing the real
// one.
type fatal struct {
	testing.TB
	msg string
}

func (f *fatal) Helper() {}

func (f *fatal) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// failure runs fn against a recording test and returns what it failed
// with, "" when it did not.
func failure(t *testing.T, fn func(testing.TB)) string {
	f := &fatal{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	return f.msg
}

// TestCheckForReportsTheLastError: a check that never passes fails the
// test with the error of its last call, not of an earlier one.
func TestCheckForReportsTheLastError(t *testing.T) {
	calls := 0
	msg := failure(t, func(tb testing.TB) {
		bustest.CheckFor(tb, 50*time.Millisecond, func() error {
			calls++
			return fmt.Errorf("call %d: not there", calls)
		})
	})
	if !strings.HasSuffix(msg, fmt.Sprintf("call %d: not there", calls)) {
		t.Errorf("after %d calls CheckFor failed with %q, want the last call's error", calls, msg)
	}
}

// TestCheckForAndEventuallyPass: a condition that comes true passes both,
// and stops the polling.
func TestCheckForAndEventuallyPass(t *testing.T) {
	calls := 0
	if msg := failure(t, func(tb testing.TB) {
		bustest.CheckFor(tb, time.Minute, func() error {
			if calls++; calls < 3 {
				return fmt.Errorf("call %d", calls)
			}
			return nil
		})
	}); msg != "" || calls != 3 {
		t.Errorf("CheckFor failed with %q after %d calls, want a pass at the third", msg, calls)
	}
	calls = 0
	if msg := failure(t, func(tb testing.TB) {
		bustest.Eventually(tb, time.Minute, "the third call", func() bool { calls++; return calls == 3 })
	}); msg != "" || calls != 3 {
		t.Errorf("Eventually failed with %q after %d calls, want a pass at the third", msg, calls)
	}
	if msg := failure(t, func(tb testing.TB) {
		bustest.Eventually(tb, 20*time.Millisecond, "never", func() bool { return false })
	}); msg != "timed out after 20ms waiting for never" {
		t.Errorf("Eventually failed with %q", msg)
	}
}
