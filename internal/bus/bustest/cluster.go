package bustest

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/internal/bus"
)

// ClusterReadyTimeout bounds how long StartCluster and Restart wait for
// the JetStream meta group to have a leader that sees every node.
const ClusterReadyTimeout = 60 * time.Second

// Cluster is an in-process NATS cluster with JetStream: n nats-servers on
// loopback, each with its own store in the test's temp dir, routed to one
// another, shut down when the test ends. Buses from it provision streams
// and buckets with n replicas (at most 5), as services started with
// --replicas do.
type Cluster struct {
	t     testing.TB
	mu    sync.Mutex
	nodes []*clusterNode
}

type clusterNode struct {
	opts *server.Options
	srv  *server.Server // nil while the node is down
}

// StartCluster starts an n-node cluster and waits until JetStream is ready
// on it: a meta leader exists, every node is routed to every other and is
// current with the meta group, and a client can reach the JetStream API.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("StartCluster: %d nodes", n)
	}
	c := &Cluster{t: t}
	// Cleanups run last first: the nodes stop before their stores (under
	// stores, made by t.TempDir before) are removed, or a node still
	// writing would leave RemoveAll a directory that is not empty.
	stores := t.TempDir()
	t.Cleanup(c.shutdownAll)
	for attempt := 1; ; attempt++ {
		err := c.startNodes(n, stores)
		if err == nil {
			break
		}
		if attempt == startAttempts {
			t.Fatalf("start a %d-node cluster, %d times: %v", n, attempt, err)
		}
		t.Logf("start a %d-node cluster: %v; again with other route ports", n, err)
		c.shutdownAll()
	}
	c.WaitReady(ClusterReadyTimeout)
	return c
}

// startAttempts bounds StartCluster's tries: a route port freePorts found
// may be taken before its node binds it.
const startAttempts = 3

// nodeReadyTimeout bounds the wait for a started node to accept
// connections; a node whose route port another process took never does.
const nodeReadyTimeout = 15 * time.Second

// startNodes starts n routed nodes on fresh route ports, each with a new
// store under stores, or stops at the first that does not become ready.
func (c *Cluster) startNodes(n int, stores string) error {
	ports := routePorts(c.t, n)
	routes := make([]*url.URL, n)
	for i, p := range ports {
		routes[i] = &url.URL{Scheme: "nats-route", Host: fmt.Sprintf("127.0.0.1:%d", p)}
	}
	dirs := make([]string, n)
	for i := range dirs {
		d, err := os.MkdirTemp(stores, fmt.Sprintf("node%d-", i+1))
		if err != nil {
			return fmt.Errorf("node %d's store: %w", i+1, err)
		}
		dirs[i] = d
	}
	c.mu.Lock()
	c.nodes = nil
	for i := range n {
		c.nodes = append(c.nodes, &clusterNode{opts: &server.Options{
			ServerName: fmt.Sprintf("tunejet-test-%d", i+1),
			Host:       "127.0.0.1",
			Port:       server.RANDOM_PORT,
			JetStream:  true,
			StoreDir:   dirs[i],
			NoSigs:     true,
			NoLog:      true,
			Cluster:    server.ClusterOpts{Name: "tunejet-test", Host: "127.0.0.1", Port: ports[i]},
			Routes:     routes,
		}})
	}
	c.mu.Unlock()
	for i := range n {
		if err := c.tryStart(i); err != nil {
			return err
		}
	}
	return nil
}

// routePorts is freePorts, or a test's stand-in.
var routePorts = freePorts

// freePorts finds n free loopback ports for the routes, which every node
// must know before it starts. The listeners are closed right away; another
// process could take a port in between, and the node would fail to start
// (StartCluster then tries again with other ports).
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("find a free port: %v", err)
		}
		ls = append(ls, l)
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports
}

// start runs node i with its options. A restarted node keeps its client
// port, so URLs stay valid.
func (c *Cluster) start(i int) {
	c.t.Helper()
	if err := c.tryStart(i); err != nil {
		c.t.Fatal(err)
	}
}

// tryStart runs node i with its options, or says why it could not.
func (c *Cluster) tryStart(i int) error {
	nd := c.nodes[i]
	s, err := server.NewServer(nd.opts)
	if err != nil {
		return fmt.Errorf("node %d: %w", i+1, err)
	}
	s.Start()
	if !s.ReadyForConnections(nodeReadyTimeout) {
		s.Shutdown()
		return fmt.Errorf("node %d: not ready for connections after %v (its route port %d taken?)", i+1, nodeReadyTimeout, nd.opts.Cluster.Port)
	}
	nd.opts.Port = s.Addr().(*net.TCPAddr).Port
	c.mu.Lock()
	nd.srv = s
	c.mu.Unlock()
	return nil
}

// WaitReady waits until a meta leader sees every node as a peer, every
// running node is current with the meta group and routed to every other
// running node, and the JetStream API answers.
func (c *Cluster) WaitReady(within time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(within)
	var why string
	for {
		why = c.notReady()
		if why == "" {
			break
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("cluster not ready after %v: %s", within, why)
		}
		time.Sleep(10 * time.Millisecond)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline.Add(10*time.Second))
	defer cancel()
	nc, err := nats.Connect(c.URL())
	if err != nil {
		c.t.Fatalf("cluster: connect: %v", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		c.t.Fatal(err)
	}
	for {
		_, err := js.AccountInfo(ctx)
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			c.t.Fatalf("cluster: the JetStream API does not answer: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// notReady says what the cluster still lacks, or "" when it is ready.
func (c *Cluster) notReady() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	up := 0
	for _, nd := range c.nodes {
		if nd.srv != nil {
			up++
		}
	}
	leader := false
	for i, nd := range c.nodes {
		if nd.srv == nil {
			continue
		}
		if nd.srv.NumRoutes() < up-1 {
			return fmt.Sprintf("node %d has %d routes, want %d", i+1, nd.srv.NumRoutes(), up-1)
		}
		if !nd.srv.JetStreamIsCurrent() {
			return fmt.Sprintf("node %d is not current with the meta group", i+1)
		}
		if nd.srv.JetStreamIsLeader() {
			leader = true
			if peers := nd.srv.JetStreamClusterPeers(); len(peers) < len(c.nodes) {
				return fmt.Sprintf("the meta leader (node %d) knows %d peers, want %d", i+1, len(peers), len(c.nodes))
			}
		}
	}
	if !leader {
		return "no meta leader"
	}
	return ""
}

// URLs are the client URLs of the running nodes.
func (c *Cluster) URLs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, nd := range c.nodes {
		if nd.srv != nil {
			out = append(out, nd.srv.ClientURL())
		}
	}
	return out
}

// URL is every node's client URL, comma-separated, as --nats and NATS_URL
// take them: a client fails over to another node when one goes.
func (c *Cluster) URL() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, nd := range c.nodes {
		out = append(out, fmt.Sprintf("nats://127.0.0.1:%d", nd.opts.Port))
	}
	return strings.Join(out, ",")
}

// Replicas is the replica count of the streams and buckets Bus provisions:
// the number of nodes, at most 5 (JetStream's limit).
func (c *Cluster) Replicas() int { return min(len(c.nodes), 5) }

// Server is node i's server (nil while it is down).
func (c *Cluster) Server(i int) *server.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i].srv
}

// Conn opens a client connection to the cluster (any node, failing over)
// that is closed when the test ends.
func (c *Cluster) Conn(name string) *nats.Conn {
	c.t.Helper()
	nc, err := nats.Connect(c.URL(), nats.Name(name), nats.MaxReconnects(-1))
	if err != nil {
		c.t.Fatalf("connect: %v", err)
	}
	c.t.Cleanup(nc.Close)
	return nc
}

// JetStream is a JetStream handle on a new connection to the cluster
// (any node, failing over): see the package's JetStream.
func (c *Cluster) JetStream() jetstream.JetStream {
	c.t.Helper()
	return JetStream(c.t, c.URL())
}

// Bus returns a bus on a new connection, provisioned with Replicas()
// replicas.
func (c *Cluster) Bus(source string) *bus.Bus {
	c.t.Helper()
	b, err := bus.New(c.Conn(source), source, zerolog.New(zerolog.NewTestWriter(c.t)).Level(zerolog.InfoLevel))
	if err != nil {
		c.t.Fatal(err)
	}
	b.Replicas = c.Replicas()
	if err := b.Provision(context.Background()); err != nil {
		c.t.Fatalf("provision on the cluster: %v", err)
	}
	return b
}

// Kill stops node i at once (its store stays, for Restart). The rest of
// the cluster keeps a quorum as long as a majority is up.
func (c *Cluster) Kill(i int) {
	c.t.Helper()
	c.mu.Lock()
	s := c.nodes[i].srv
	c.nodes[i].srv = nil
	c.mu.Unlock()
	if s == nil {
		c.t.Fatalf("node %d is already down", i+1)
	}
	s.Shutdown()
	s.WaitForShutdown()
}

// Restart starts a killed node again on its store and ports and waits
// until the cluster is ready.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	if c.Server(i) != nil {
		c.t.Fatalf("node %d is running", i+1)
	}
	c.start(i)
	c.WaitReady(ClusterReadyTimeout)
}

// Shutdown stops every node. The test's cleanup calls it too.
func (c *Cluster) Shutdown() { c.shutdownAll() }

func (c *Cluster) shutdownAll() {
	c.mu.Lock()
	var ss []*server.Server
	for _, nd := range c.nodes {
		if nd.srv != nil {
			ss = append(ss, nd.srv)
			nd.srv = nil
		}
	}
	c.mu.Unlock()
	for _, s := range ss {
		s.Shutdown()
	}
	for _, s := range ss {
		s.WaitForShutdown()
	}
}
