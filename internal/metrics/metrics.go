// Package metrics holds tunejet's Prometheus metrics and the small HTTP
// server that exposes them with a health check.
//
// # Metrics
//
//	tunejet_trials{experiment,status}                  trials by status (controller)
//	tunejet_reports_total{experiment}                  results reported (runner)
//	tunejet_redeliveries_total{experiment}             trial work delivered again (runner)
//	tunejet_trial_failures_total{experiment,cause}     failed attempts by cause (runner, controller)
//	tunejet_sync_lag_events{experiment}                log events not yet in storage (syncer)
//	tunejet_sync_failures_total{experiment}            syncs that failed after their retries (syncer)
//	tunejet_warm_workers{experiment}                   warm workers kept, loaded and ready (runner)
//	tunejet_warm_worker_rss_bytes{experiment}          their resident memory, summed (runner)
//	tunejet_restore_seconds                            time to restore an experiment (restorer)
package metrics

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

var (
	Trials = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tunejet_trials", Help: "Trials by status.",
	}, []string{"experiment", "status"})
	Reports = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "tunejet_reports_total", Help: "Results reported by trials.",
	}, []string{"experiment"})
	Redeliveries = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "tunejet_redeliveries_total", Help: "Trial work delivered again after a failure or a lost runner.",
	}, []string{"experiment"})
	Failures = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "tunejet_trial_failures_total", Help: "Failed trial attempts by cause: error, lost, preempted.",
	}, []string{"experiment", "cause"})
	SyncLag = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tunejet_sync_lag_events", Help: "Events in the log not yet reflected in storage.",
	}, []string{"experiment"})
	SyncFailures = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "tunejet_sync_failures_total", Help: "Syncs that failed even after their retries.",
	}, []string{"experiment"})
	WarmWorkers = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tunejet_warm_workers", Help: "Warm workers (fork servers) a runner keeps, loaded and ready.",
	}, []string{"experiment"})
	WarmWorkerRSS = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tunejet_warm_worker_rss_bytes", Help: "Resident memory of a runner's warm workers, summed.",
	}, []string{"experiment"})
	RestoreSeconds = promauto.NewHistogram(prometheus.HistogramOpts{
		Name: "tunejet_restore_seconds", Help: "Time to restore an experiment.",
		Buckets: prometheus.ExponentialBuckets(0.05, 2, 12),
	})
)

// Serve exposes /metrics and /healthz on addr until ctx ends. healthy
// says whether the service can do its work (connected to NATS).
func Serve(ctx context.Context, addr string, healthy func() bool) error {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.Handler())
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if !healthy() {
			http.Error(w, "not connected to NATS", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
