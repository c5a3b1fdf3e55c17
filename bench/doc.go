// Package bench holds tunejet's end-to-end benchmarks. They start a real
// nats-server in the process and run the services against it, as a
// deployment would (in process on their own connections, or as real
// `tunejet` processes), and measure what a user sees: how close a tuning
// run gets to the time its trials need, how many reports per second travel
// from tune.Report to result.json, how fast a killed runner's trial runs
// again, how fast checkpoints are staged and persisted, how long a
// restore takes, what a replicated 3-node cluster costs, how long an
// experiment goes without a controller when the active one dies, and what
// a Python trial's start and a PBT exploit cost a Ray Tune script run by a
// real interpreter (python_test.go).
//
// The benchmarks run only with -bench (there are no tests here):
//
//	make bench
//	go test -run='^$' -bench=. -benchtime=1x -timeout=60m ./bench/
//
// With -short each runs at its smallest scale, to check that it completes
// (make test does so); its figures then mean nothing.
//
// Each benchmark measures its baseline in the same run and reports the
// ratio with b.ReportMetric; none asserts a timing threshold, only
// correctness. Environment variables (TUNEJET_BENCH_*) scale them; each
// benchmark's doc comment names its own, and bench/README.md lists them
// all and says how to read the figures. BENCHMARKS.md at the repository
// root holds the latest figure of each.
package bench
