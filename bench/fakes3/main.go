// Command fakes3 serves gofakes3's in-memory S3 with one bucket on
// 127.0.0.1, for BenchmarkCheckpointPersistence. It runs apart from the
// benchmark's process: an in-process S3 server holding gigabytes of
// objects grew that process's heap to 8.5 GB and stalled it, nats-server
// and the runner with it, for seconds.
//
// Usage: fakes3 BUCKET. It prints its address (host:port) on the first
// line of standard output and serves until killed.
package main

import (
	"fmt"
	"net"
	"net/http"
	"os"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: fakes3 BUCKET")
		os.Exit(2)
	}
	backend := s3mem.New()
	if err := backend.CreateBucket(os.Args[1]); err != nil {
		fmt.Fprintf(os.Stderr, "fakes3: create bucket %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintf(os.Stderr, "fakes3: %v\n", err)
		os.Exit(1)
	}
	fmt.Println(ln.Addr())
	srv := &http.Server{Handler: gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog())).Server()}
	if err := srv.Serve(ln); err != nil {
		fmt.Fprintf(os.Stderr, "fakes3: %v\n", err)
		os.Exit(1)
	}
}
