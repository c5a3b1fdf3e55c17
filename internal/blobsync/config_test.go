package blobsync

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

func TestConfigDefaults(t *testing.T) {
	got := Config{}.WithDefaults()
	want := Config{SyncPeriod: 300 * time.Second, SyncTimeout: 1800 * time.Second, MaxRetries: 2, RetryBackoff: 5 * time.Second}
	if got != want {
		t.Fatalf("defaults = %+v, want %+v", got, want)
	}
	set := Config{SyncPeriod: time.Second, SyncTimeout: 2 * time.Second, MaxRetries: 7, RetryBackoff: time.Millisecond}
	if set.WithDefaults() != set {
		t.Fatalf("WithDefaults changed set fields: %+v", set.WithDefaults())
	}
}

func TestConfigValidate(t *testing.T) {
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("zero config: %v", err)
	}
	err := Config{SyncPeriod: -1, SyncTimeout: -time.Second, MaxRetries: -1, RetryBackoff: -2}.Validate()
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("Validate = %v, want ErrInvalidConfig", err)
	}
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok || len(joined.Unwrap()) != 4 {
		t.Fatalf("Validate = %v, want 4 joined errors", err)
	}
	for _, field := range []string{"SyncPeriod", "SyncTimeout", "MaxRetries", "RetryBackoff"} {
		if !strings.Contains(err.Error(), field+" must not be negative") {
			t.Errorf("Validate error %q does not name %s", err, field)
		}
	}
	if _, err := New(Config{MaxRetries: -1}, zerolog.Nop()); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("New with a bad config = %v", err)
	}
}
