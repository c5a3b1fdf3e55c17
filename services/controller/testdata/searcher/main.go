// Command searcher is an external searcher for tunejet's tests: a NATS
// service, in a process of its own, that answers suggest requests on a
// subject with the best config so far nudged (or a first draw from the
// index while no trial has finished). It is stateless: everything it
// needs is in the request.
//
//	searcher -url nats://127.0.0.1:4222 -subject test.searcher [-bad unknown_key,out_of_domain,error]
//
// -bad lists the first replies to spoil, in order: unknown_key adds a key
// the param space lacks, out_of_domain sets x out of its domain, error
// answers an error. Each reply is printed to stdout as one JSON line:
// {"index": ..., "seq": ..., "kind": "good"|<bad kind>, "config": ...}.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/nats-io/nats.go"

	"github.com/tunejet/tunejet/api"
)

func main() {
	url := flag.String("url", nats.DefaultURL, "NATS server URL")
	subject := flag.String("subject", "", "the subject to answer")
	bad := flag.String("bad", "", "comma-separated kinds of the first replies to spoil")
	flag.Parse()
	if err := run(*url, *subject, *bad); err != nil {
		fmt.Fprintln(os.Stderr, "searcher:", err)
		os.Exit(1)
	}
}

func run(url, subject, bad string) error {
	nc, err := nats.Connect(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	var spoil []string
	if bad != "" {
		spoil = strings.Split(bad, ",")
	}
	var mu sync.Mutex
	out := json.NewEncoder(os.Stdout)
	_, err = nc.Subscribe(subject, func(m *nats.Msg) {
		mu.Lock()
		defer mu.Unlock()
		var req api.SuggestRequest
		if err := json.Unmarshal(m.Data, &req); err != nil {
			respond(m, api.SuggestReply{Error: err.Error(), Code: api.CodeBadRequest})
			return
		}
		kind, reply := "good", api.SuggestReply{Config: suggest(req)}
		if len(spoil) > 0 {
			kind, spoil = spoil[0], spoil[1:]
			switch kind {
			case "unknown_key":
				reply.Config["momentum"] = 0.9
			case "out_of_domain":
				reply.Config["x"] = 1e6
			default:
				reply = api.SuggestReply{Error: "the study is not ready", Code: api.CodeInternal}
			}
		}
		_ = out.Encode(map[string]any{"index": req.Index, "seq": req.Seq, "kind": kind, "config": reply.Config})
		respond(m, reply)
	})
	if err != nil {
		return err
	}
	if err := nc.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "searcher: ready") // the test waits for this line
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	return nil
}

func respond(m *nats.Msg, reply api.SuggestReply) {
	data, _ := json.Marshal(reply)
	_ = m.Respond(data)
}

// suggest handles a space of uniform domains ({"uniform": [low, high]}):
// the best finished trial's values, each moved by a tenth of its range,
// up or down by the index's parity and kept within it; before any trial
// has finished, a point spread over the range by the index.
func suggest(req api.SuggestRequest) map[string]any {
	var best *api.SearchTrial
	for i, t := range req.History {
		if t.Value == nil || (best != nil && !better(*t.Value, *best.Value, req.Mode)) {
			continue
		}
		best = &req.History[i]
	}
	config := map[string]any{}
	for k, v := range req.ParamSpace {
		m, _ := v.(map[string]any)
		d, ok := m["uniform"].([]any)
		if !ok {
			continue
		}
		low, high := d[0].(float64), d[1].(float64)
		x := low + (high-low)*math.Mod(0.37*float64(req.Index+1), 1)
		if best != nil {
			step := (high - low) / 10
			if req.Index%2 == 1 {
				step = -step
			}
			x = math.Min(high, math.Max(low, best.Config[k].(float64)+step))
		}
		config[k] = x
	}
	return config
}

func better(a, b float64, mode string) bool {
	if mode == "max" {
		return a > b
	}
	return a < b
}
