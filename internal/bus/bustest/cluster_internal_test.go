package bustest

import (
	"net"
	"testing"

	"github.com/nats-io/nats.go"
)

// A route port taken between freePorts and its node's start (by another
// test's connection, say) made StartCluster fail the test after 30 s; it
// now starts the cluster again on other ports.
func TestStartClusterTriesOtherPortsWhenARouteIsTaken(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	calls := 0
	routePorts = func(t testing.TB, n int) []int {
		calls++
		ports := freePorts(t, n)
		if calls == 1 {
			ports[n-1] = taken.Addr().(*net.TCPAddr).Port
		}
		return ports
	}
	defer func() { routePorts = freePorts }()
	c := StartCluster(t, 3)
	if calls != 2 {
		t.Errorf("the route ports were chosen %d times, want 2: once with the taken port, once more", calls)
	}
	nc, err := nats.Connect(c.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
}
