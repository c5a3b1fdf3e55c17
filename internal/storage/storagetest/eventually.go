package storagetest

import (
	"testing"
	"time"
)

// Eventually polls cond until it holds, failing the test with msg if it
// does not within 10 seconds. Use it instead of sleeping.
func Eventually(t testing.TB, msg string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("storagetest: gave up waiting: %s", msg)
		}
		<-tick.C
	}
}
