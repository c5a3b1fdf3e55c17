// Package bench holds tunejet's end-to-end benchmarks. They start a real
// nats-server in the process and run the services against it, as a
// deployment would (in process on their own connections, or as real
// `tunejet` processes), and measure what a user sees: how close a tuning
// run gets to the time its trials need, how many reports per second travel
// from tune.Report to result.json, how fast a killed runner's trial runs
// again, how fast checkpoints are staged and persisted, how long a
// restore takes, what a replicated 3-node cluster costs, and how long an
// experiment goes without a controller when the active one dies.
//
// The benchmarks run only with -bench (there are no tests here):
//
//	make bench
//	go test -run='^$' -bench=. -benchtime=1x -timeout=60m ./bench/
//
// Each benchmark measures its baseline in the same run and reports the
// ratio with b.ReportMetric; none asserts a timing threshold, only
// correctness. Environment variables scale them:
//
//	TUNEJET_BENCH_TRIALS              trials of BenchmarkBookkeeping (1000)
//	TUNEJET_BENCH_REPORT_TRIALS       trials of BenchmarkReportThroughput (8)
//	TUNEJET_BENCH_REPORTS             reports per trial of BenchmarkReportThroughput (25000)
//	TUNEJET_BENCH_KILLS               runner kills of BenchmarkFailureRecovery (20)
//	TUNEJET_BENCH_CKPT_MAX_MB         largest checkpoint of the checkpoint benchmarks, in MB
//	                                  (1024 for staging, 100 for persistence; 1024 adds 1 GB)
//	TUNEJET_BENCH_CKPT_REPS           repetitions per checkpoint size (20 for 1 MB, 3 for 100 MB, 1 for 1 GB)
//	TUNEJET_BENCH_RESTORE_MAX_TRIALS  largest history of BenchmarkRestore (1000; 10000 adds 10,000 trials)
//	TUNEJET_BENCH_RESTORE_REPORTS     reports per trial of BenchmarkRestore (100)
//	TUNEJET_BENCH_RESTORE_TAIL        events after the snapshot in BenchmarkRestore's snapshot+tail (1000)
//	TUNEJET_BENCH_CLUSTER             1 runs BenchmarkBookkeepingCluster and BenchmarkReportThroughputCluster
//	                                  (the deployment workloads on a single server and on a 3-node R3 cluster)
//	TUNEJET_BENCH_CLUSTER_PAIRS       single-server + cluster pairs of those, in alternating order (1)
//	TUNEJET_BENCH_TAKEOVERS           controller kills of BenchmarkControllerTakeover (10)
//
// BENCHMARKS.md at the repository root records the numbers.
package bench
