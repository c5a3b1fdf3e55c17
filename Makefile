# tunejet — one entry point per habit. `make help` lists them.
GO ?= go
BIN := bin/tunejet
# The Python tests run on Debian's interpreter where there is one: .ci/run
# installs their packages there with apt-get (python3-cloudpickle, and
# python3-pandas for the Ray examples).
PYTHON ?= $(shell test -x /usr/bin/python3 && echo /usr/bin/python3 || echo python3)

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*##"} /^[a-z-]+:.*##/ {printf "  %-8s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## build bin/tunejet
	$(GO) build -o $(BIN) ./cmd/tunejet

.PHONY: run
run: ## run the quickstart experiment on the embedded stack
	$(GO) run ./examples/quickstart

# The longest packages' tests go first (go test starts packages in the order
# named and tests each once), so that none runs alone at the end.
SLOW_PACKAGES := ./tune ./services/controller ./services/syncer ./internal/state ./internal/dashboard ./internal/ckpt

.PHONY: test
# cmd/'s tests start real processes with heartbeat timeouts of 1-3 s and a
# chaos soak; they run on their own, not beside the other packages' tests on
# the same two cores. They mostly wait on those processes (about half a core
# each), so four run at once. Then every benchmark once at its smallest scale (-short; no timing).
test: ## run every test with the race detector
	$(GO) test -race -count=1 -parallel 4 -timeout 10m ./cmd/...
	$(GO) test -race -count=1 -timeout 10m $(SLOW_PACKAGES) $$($(GO) list ./... | grep -v /cmd/)
	$(GO) test -short -count=1 -run '^$$' -bench . -benchtime 1x -timeout 5m $$(grep -rl --include='*_test.go' '^func Benchmark' . | xargs -n1 dirname | sort -u)
	$(GO) build -o $(BIN) ./cmd/tunejet
	TUNEJET_BIN=$(CURDIR)/$(BIN) $(PYTHON) -m unittest discover -s sdk/python/tests -t sdk/python

.PHONY: test-short
test-short: ## run the fast tests only
	$(GO) test -short -count=1 ./...

# golangci-lint at a pinned version: `go run pkg@version` fetches it through
# the module proxy and builds it into the Go build cache, so CI installs
# nothing by hand and go.mod carries none of its dependencies.
GOLANGCI_LINT ?= $(GO) run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0

.PHONY: check
check: ## gofmt, go vet, go mod tidy diff, import-direction rule, lint
	@out=$$(gofmt -s -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt -s would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) mod tidy -diff
	$(GO) test -count=1 ./internal/archtest
	@$(MAKE) --no-print-directory lint

.PHONY: lint
lint: ## golangci-lint with .golangci.yml
	$(GOLANGCI_LINT) run --allow-serial-runners ./...

# The soak's processes are the plain tunejet binary either way; without
# -race the test's own log readers keep up with the kill loop. The short
# version (TestChaosShort) runs under make test, with -race.
SOAK ?= 10m
SOAK_TIMEOUT ?= 45m

.PHONY: soak
soak: ## chaos soak, SOAK=10m: kill -9 services, NATS nodes, tunejet run; figures
	TUNEJET_SOAK=$(SOAK) $(GO) test -run TestStagedBytesAreTheEventsWhenTheLeaderDies -count=1 -timeout 10m ./internal/ckpt
	TUNEJET_SOAK=$(SOAK) $(GO) test -run TestChaos -count=1 -v -timeout $(SOAK_TIMEOUT) ./cmd/tunejet

.PHONY: bench-tuner
bench-tuner: ## the tuner's quality table (TPE, GP, ASHA and PBT against random search) and speed figures
	TUNEJET_REGRET=1 $(GO) test -run 'TestRegret$$|TestReproducibleCost$$' -v -count=1 -timeout 30m ./internal/tpe/
	TUNEJET_REGRET=1 $(GO) test -run 'TestRegret$$' -v -count=1 -timeout 30m ./internal/gp/
	TUNEJET_REGRET=1 $(GO) test -run 'TestHypervolume$$' -v -count=1 -timeout 10m ./internal/nsga2/
	TUNEJET_REGRET=1 $(GO) test -run 'TestASHARegret$$' -v -count=1 -timeout 10m ./internal/sched/
	TUNEJET_REGRET=1 $(GO) test -run 'TestPBTRegret$$' -v -count=1 -timeout 10m ./internal/sched/
	$(GO) test -run '^$$' -bench 'BenchmarkSuggest1000' -benchtime 50x ./internal/tpe/
	$(GO) test -run '^$$' -bench 'BenchmarkDecideTPE1000' -benchtime 100x ./services/controller/
	$(GO) test -run '^$$' -bench 'BenchmarkDecideGP200' -benchtime 10x ./services/controller/
	$(GO) test -run='^$$' -bench='BenchmarkSchedulerThroughput' -benchtime=1x -timeout=30m ./bench/

# Go fuzzes one target per run; FUZZTIME each, one worker so as to share
# the machine. New inputs go to the build cache, a failing one to the
# package's testdata/fuzz (docs/testing.md).
FUZZTIME ?= 1m
FUZZ := $(GO) test -run '^$$' -fuzztime $(FUZZTIME) -parallel 1 -fuzz

.PHONY: fuzz
fuzz: ## fuzz every target in turn, FUZZTIME=1m each
	$(FUZZ) '^FuzzDecodeBinary$$' ./events
	$(FUZZ) '^FuzzDecodeStructured$$' ./events
	$(FUZZ) '^FuzzLeanReported$$' ./events
	$(FUZZ) '^FuzzReadLine$$' ./internal/trainproto
	$(FUZZ) '^FuzzDecodeRequest$$' ./internal/trainproto
	$(FUZZ) '^FuzzParseYAML$$' ./internal/spec
	$(FUZZ) '^FuzzParseJSON$$' ./internal/spec
	$(FUZZ) '^FuzzLoad$$' ./internal/state
	$(FUZZ) '^FuzzLoadState$$' ./internal/state

# Whether a target still reaches new code: its cached corpus as of SINCE
# against all of it, as statement coverage of its package (docs/testing.md).
SINCE ?= 5 min ago
.PHONY: fuzz-coverage
fuzz-coverage: ## did fuzzing still find new code lately? PKG=events TARGET=FuzzDecodeBinary SINCE='5 min ago'
	.ci/fuzz-coverage $(PKG) $(TARGET) '$(SINCE)'

.PHONY: bench
bench: ## run the benchmarks recorded in BENCHMARKS.md
	$(GO) test -run='^$$' -bench=. -benchtime=1x -timeout=60m ./bench/...
