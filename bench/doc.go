// Package bench holds tunejet's end-to-end benchmarks. They start a real
// nats-server in the process and run the controller, a runner and the
// syncer against it, as a deployment would, and measure what a user
// sees: how close a tuning run gets to the time its trials need, and how
// many reports per second travel from tune.Report to result.json.
//
// The benchmarks run only with -bench (there are no tests here):
//
//	make bench
//	go test -run='^$' -bench=. -benchtime=1x -timeout=60m ./bench/
//
// Each benchmark measures its baseline in the same run and reports the
// ratio with b.ReportMetric; none asserts a timing threshold. Environment
// variables scale them down for a quick run:
//
//	TUNEJET_BENCH_TRIALS          trials of BenchmarkBookkeeping (1000)
//	TUNEJET_BENCH_REPORT_TRIALS   trials of BenchmarkReportThroughput (8)
//	TUNEJET_BENCH_REPORTS         reports per trial of BenchmarkReportThroughput (25000)
//
// BENCHMARKS.md at the repository root records the numbers.
package bench
