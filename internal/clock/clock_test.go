package clock

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestSleepWaitsTheDuration(t *testing.T) {
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("Sleep: %v, want nil after the duration", err)
	}
}

func TestSleepEndsWithTheContextsCause(t *testing.T) {
	cause := errors.New("stopping")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(cause)
	// An hour: only the context can end this wait within the test.
	if err := Sleep(ctx, time.Hour); !errors.Is(err, cause) {
		t.Fatalf("Sleep: %v, want the context's cause %v", err, cause)
	}
}

func TestSleepEndsWithCanceledWithoutCause(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep: %v, want context.Canceled", err)
	}
}
