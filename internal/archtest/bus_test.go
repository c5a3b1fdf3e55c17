package archtest

import (
	"strings"
	"testing"
)

// natsClient is the NATS client module: its packages (nats.go, jetstream,
// micro) are internal/bus's to use.
const natsClient = "github.com/nats-io/nats.go"

// TestServicesSpeakThroughTheBus: a service reaches NATS only through
// internal/bus's verbs. No package under services/ imports the NATS client
// (its tests may, to break things on purpose). The bus's raw connection is
// unexported, so the compiler keeps everyone else off it.
func TestServicesSpeakThroughTheBus(t *testing.T) {
	for _, p := range listPackages(t) {
		if from, _ := layer(p.ImportPath); from != "services" {
			continue
		}
		for _, imp := range p.Imports {
			if imp == natsClient || strings.HasPrefix(imp, natsClient+"/") {
				t.Errorf("%s imports %s: services use internal/bus, never the NATS client", p.ImportPath, imp)
			}
		}
	}
}
