package main_test

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tunejet/tunejet/internal/bus/bustest"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func httpGet(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestServicesAreObservable: each service process answers NATS micro's
// PING as tunejet-<name>, and serves /healthz and Prometheus /metrics.
func TestServicesAreObservable(t *testing.T) {
	t.Parallel()
	srv := bustest.Start(t)
	addrs := map[string]string{}
	for _, name := range []string{"controller", "runner", "syncer", "restorer"} {
		addrs[name] = freeAddr(t)
		startTunejet(t, "", baseEnv(), name, "--nats", srv.URL(), "--metrics-addr", addrs[name])
	}
	for name, addr := range addrs {
		var code int
		var body string
		bustest.Eventually(t, time.Minute, name+" /healthz", func() bool {
			code, body = httpGet("http://" + addr + "/healthz")
			return code == http.StatusOK
		})
		code, body = httpGet("http://" + addr + "/metrics")
		if code != http.StatusOK || !strings.Contains(body, "tunejet_restore_seconds") {
			t.Errorf("%s /metrics: %d, body lacks tunejet metrics:\n%.300s", name, code, body)
		}
	}
	nc := srv.Conn()
	seen := map[string]bool{}
	bustest.Eventually(t, time.Minute, "every service to answer $SRV.PING", func() bool {
		inbox := nats.NewInbox()
		sub, err := nc.SubscribeSync(inbox)
		if err != nil {
			return false
		}
		defer sub.Unsubscribe()
		if err := nc.PublishRequest("$SRV.PING", inbox, nil); err != nil {
			return false
		}
		for {
			m, err := sub.NextMsg(200 * time.Millisecond)
			if err != nil {
				break
			}
			var ping struct{ Name string }
			if json.Unmarshal(m.Data, &ping) == nil {
				seen[ping.Name] = true
			}
		}
		return seen["tunejet-controller"] && seen["tunejet-runner"] && seen["tunejet-syncer"] && seen["tunejet-restorer"]
	})
}
