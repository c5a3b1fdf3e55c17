package bus_test

import (
	"testing"

	"github.com/tunejet/tunejet/internal/bus/bustest"
)

// TestDeploymentIdentity: every client of one JetStream store reads the
// same identity, made by the first to ask; another store has another.
func TestDeploymentIdentity(t *testing.T) {
	srv := bustest.Start(t)
	first, err := srv.Bus("first").Deployment(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	second, err := srv.Bus("second").Deployment(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if first.ID == "" || second != first || first.Store != srv.URL() {
		t.Fatalf("two clients of one store read %+v and %+v; want one identity, its store %s", first, second, srv.URL())
	}
	other, err := bustest.Start(t).Bus("other").Deployment(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if other.ID == first.ID {
		t.Fatalf("another store has the same identity %s", other.ID)
	}
}
