package spec

import (
	"strings"
	"testing"

	"github.com/tunejet/tunejet/events"
)

// checkpoint_config.route: the three values, and a clear message for
// anything else, from the experiment file and from the Go API.
func TestCheckpointRoute(t *testing.T) {
	const head = "trainable: {name: fn}\nrun_config:\n  checkpoint_config:\n    route: "
	for _, route := range []string{"auto", "storage", "object_store"} {
		s, err := Parse("exp.yaml", []byte(head+route+"\n"))
		if err != nil {
			t.Fatalf("route %s: %v", route, err)
		}
		if got := s.RunConfig.CheckpointConfig.Route; got != route {
			t.Errorf("route %s parsed as %q", route, got)
		}
	}
	_, err := Parse("exp.yaml", []byte(head+"nfs\n"))
	want := `exp.yaml:4: run_config.checkpoint_config.route: route must be "auto" (checkpoints go straight to storage when the runner reaches it, else through the Object Store), "storage" or "object_store", got "nfs".`
	if err == nil || err.Error() != want {
		t.Errorf("route nfs: %v\nwant %s", err, want)
	}
	s := &events.ExperimentSpec{Trainable: events.Trainable{Name: "fn"}}
	s.RunConfig.CheckpointConfig.Route = "Storage"
	if err := Validate(s); err == nil || !strings.Contains(err.Error(), `got "Storage"`) {
		t.Errorf("Validate of route Storage: %v", err)
	}
}
