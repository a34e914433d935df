# Raven. `make help` lists the targets.
SHELL := /bin/bash
export GOTOOLCHAIN := local
GO ?= go
# The benchmark's own waits follow the Neutron floor it measures; this only bounds the whole run.
BENCH_TIMEOUT ?= 180m
BIN := bin
# The images' build flags (static, paths trimmed), which vet, the e2e suite and the Raven it runs use too: each
# package is then compiled once for all of them (the race-enabled unit tests compile their own).
STATIC := CGO_ENABLED=0 GOFLAGS=-trimpath
GOLANGCI_VERSION := v2.15.0
GOLANGCI := $(BIN)/golangci-lint-$(GOLANGCI_VERSION)
STACK_ENV := .stack/env

.DEFAULT_GOAL := help

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN{FS=":.*## "} /^[a-zA-Z0-9_-]+:.*## /{printf "  \033[36m%-12s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build bin/raven, and the node side: bin/raven-node (the per-node daemon) and bin/raven-cni (the CNI plugin).
	$(GO) build -o $(BIN)/raven ./cmd/raven
	$(GO) build -o $(BIN)/raven-node ./cmd/raven-node
	$(GO) build -o $(BIN)/raven-cni ./cmd/raven-cni

# VERSION tags Raven's images: the tag or commit of the tree (dirty when it has changes), never latest.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
IMAGE_BINS := $(BIN)/image-bins
# OVS_ROOT is the root file system whose Open vSwitch clients go into the raven-node image: the local stack's
# OpenStack root (hack/build-openstack-rootfs.sh) when it runs from one, else this machine's.
OVS_ROOT ?= $(or $(shell cat .stack/openstack-root 2>/dev/null),/)

.PHONY: images
images: ## Build the images (raven, raven-node, testserver also as nginx, pause) as tarballs in bin/images/ without a Docker engine; `go run ./hack/images serve --dir bin/images` serves them.
	@mkdir -p $(IMAGE_BINS)
	$(STATIC) $(GO) build -ldflags "-s -w" -o $(IMAGE_BINS)/ ./cmd/raven ./cmd/raven-node ./cmd/raven-cni ./hack/testserver ./hack/images
	@rm -rf $(BIN)/images
	$(IMAGE_BINS)/images build --bin $(IMAGE_BINS) --out $(BIN)/images --version $(VERSION) --ovs-root $(OVS_ROOT)

.PHONY: run
run: build stack-up ## Bring the local stack up (when it is not running), install Raven in its cluster from deploy/ (hack/stack.sh install-raven) and follow Raven's log.
	@./hack/stack.sh install-raven
	@. $(STACK_ENV) && echo "Raven runs in the cluster (kubectl -n raven-system get deployment raven, after '. $(STACK_ENV)'); its log follows" && \
	  exec kubectl -n raven-system logs -f deployment/raven

.PHONY: test
test: ## Lint, unit tests, then e2e tests on the real local stack (started and stopped by the tests when not running); the stack's parts are built beside lint and unit tests (hack/test.sh), and the last line gives each stage's minutes.
	@MAKE="$(MAKE)" hack/test.sh

.PHONY: test-unit
test-unit: ## Unit tests; no service needed.
	$(STATIC) $(GO) vet ./...
	@out=$$(gofmt -l cmd internal hack test); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) test -race -count=1 ./internal/... ./cmd/... ./hack/...

# The shared phase's tests run E2E_PARALLEL at a time (test/e2e/phases_test.go). E2E_TIMEOUT bounds the whole suite:
# about 1.5 times its length on a 2-core machine (bench/results/ci/ holds the measured runs).
E2E_PARALLEL ?= 4
E2E_TIMEOUT ?= 50m

.PHONY: test-e2e
test-e2e: ## E2e tests on the real stack (Kubernetes, Neutron, Octavia on 127.0.0.1): the serial phase, then the shared phase's tests E2E_PARALLEL at a time.
	@mkdir -p $(BIN)
	$(STATIC) $(GO) test -tags e2e -count=1 -timeout $(E2E_TIMEOUT) -parallel $(E2E_PARALLEL) -v ./test/e2e/... 2>&1 | tee $(BIN)/e2e.log | grep --line-buffered -E '^(=== RUN|--- |PASS|FAIL|ok|panic)|_test.go:|harness|\[stack|\[build|\[install' ; exit $${PIPESTATUS[0]}

# bench_run runs one benchmark test ($(1)), its whole output in $(BIN)/$(2).log.
bench_run = $(GO) test -tags e2e,bench -count=1 -timeout $(BENCH_TIMEOUT) -v -run '^$(1)$$' ./test/e2e/ $(BENCH_ARGS) 2>&1 | tee $(BIN)/$(2).log | grep --line-buffered -E '^(=== RUN|--- |PASS|FAIL|ok|panic)|_test.go:|harness|\| ' ; exit $${PIPESTATUS[0]}

.PHONY: bench
# The benchmark measures the control plane: a stack it starts itself has no node side.
bench: export STACK_CNI ?= 0
bench: ## Benchmark on the real stack (control plane, STACK_CNI=0): its own floor, then Raven (bench/results/latest.{json,md}, latency.png).
	@mkdir -p $(BIN) bench/results
	$(call bench_run,TestBenchmark,bench)

.PHONY: bench-node
# The node benchmark needs the node side: a stack it starts itself has it.
bench-node: export STACK_CNI ?= 1
bench-node: ## Node benchmark (real nodes): created → answered with pools off, warm, and warm per node, beside Neutron's, the node's (floor-cni) and Kubernetes' floors; CPU and RSS per component; then on the nested node, pools off and a warm trunk pool beside their floors, and one trunk filled (bench/results/node/).
	@mkdir -p $(BIN) bench/results/node
	$(call bench_run,TestBenchmarkNode,bench-node)

.PHONY: bench-services
# Services carry traffic only on the ovn provider, which needs the node side: a stack it starts itself has both.
bench-services: export STACK_CNI ?= 1
bench-services: ## Service benchmark (STACK_CNI=1, ovn provider): 100 endpoints, endpoint churn, 100 ports, each beside a load balancer built by hand (bench/results/services/).
	@mkdir -p $(BIN) bench/results/services
	$(call bench_run,TestBenchmarkServices,bench-services)

.PHONY: bench-provider
# No pod is needed: a stack it starts itself has no node side.
bench-provider: export STACK_CNI ?= 0
bench-provider: ## The OVN provider alone, without Raven: a member change timed to Octavia's answer, OVN NB, OVN SB and Octavia's listing, per pool size, with and without a health monitor (bench/results/provider/).
	@mkdir -p $(BIN) bench/results/provider
	$(call bench_run,TestBenchmarkProvider,bench-provider)

.PHONY: bench-calibrate
# Neutron and Octavia alone, no pod: a stack it starts itself has no node side.
bench-calibrate: export STACK_CNI ?= 0
bench-calibrate: ## Neutron's and Octavia's per-call latency (p50, p99) and concurrency, without Raven, through Raven's OpenStack clients: the scale simulator's model (bench/results/scale/model.json, calibration.{json,md}).
	@mkdir -p $(BIN) bench/results/scale
	$(call bench_run,TestBenchmarkCalibrate,bench-calibrate)

.PHONY: bench-scale
# Its own kube-apiserver and etcd, and OpenStack simulated with the calibrated model: no stack is needed.
bench-scale: ## Scale benchmark: a real kube-apiserver + etcd, Neutron and Octavia simulated (hack/openstack-sim) with bench/results/scale/model.json; at 1k, 10k, 50k pods: cold start, failover, churn beside its floor, calls per resync, Raven's CPU and RSS, idle pool ports (bench/results/scale/latest.{json,md}); SCALE_ARGS passes flags (-scale.sizes=1000,10000,50000).
	@mkdir -p $(BIN) bench/results/scale
	$(GO) test -tags bench -count=1 -timeout $(BENCH_TIMEOUT) -v -run '^TestBenchmarkScale$$' ./test/scale/ -args $(SCALE_ARGS) 2>&1 | tee $(BIN)/bench-scale.log | grep --line-buffered -E '^(=== RUN|--- |PASS|FAIL|ok|panic)|_test.go:' ; exit $${PIPESTATUS[0]}

.PHONY: bench-netpol
bench-netpol: export STACK_CNI ?= 1
bench-netpol: ## NetworkPolicy benchmark (STACK_CNI=1): rule by hand → enforced (the floor) beside policy created/deleted and pod labelled → enforced; Neutron rules of a policy at 10, 100, 200, 300 pods (bench/results/netpol/).
	@mkdir -p $(BIN) bench/results/netpol
	$(call bench_run,TestBenchmarkNetworkPolicy,bench-netpol)

.PHONY: chaos
chaos: ## The long fault-injection suite (the bounded version runs in make test), plus 30 s of each fuzzer.
	@mkdir -p $(BIN)
	$(GO) test -tags e2e -count=1 -timeout 60m -v -run Chaos ./test/e2e/ -args -chaos.kills=5 -chaos.ops=200 -chaos.report -chaos.long 2>&1 | tee $(BIN)/chaos.log | grep --line-buffered -E '^(=== RUN|--- |PASS|FAIL|ok|panic)|_test.go:|harness' ; test $${PIPESTATUS[0]} -eq 0
	$(GO) test -run '^$$' -fuzz FuzzDecodePort -fuzztime 30s ./pkg/annotations/
	$(GO) test -run '^$$' -fuzz FuzzFloatingIP -fuzztime 30s ./internal/controller/service/
	$(GO) test -run '^$$' -fuzz FuzzUpperHalf -fuzztime 30s ./internal/neutron/

.PHONY: lint
lint: $(GOLANGCI) ## Run golangci-lint with .golangci.yml (e2e and bench tests included); installs it the first time.
	$(GOLANGCI) run ./...

# The binary's name carries its version, so that a change of GOLANGCI_VERSION installs the new one.
$(GOLANGCI):
	@echo "installing golangci-lint $(GOLANGCI_VERSION) into $(BIN)/ (a few minutes the first time)"
	@mkdir -p $(BIN)/.golangci-install
	GOBIN=$(abspath $(BIN))/.golangci-install $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_VERSION)
	mv $(BIN)/.golangci-install/golangci-lint $@ && rmdir $(BIN)/.golangci-install

.PHONY: stack-up
stack-up: ## Start the local stack (builds Kubernetes once, installs Neutron/Octavia with apt when missing).
	hack/stack.sh up

.PHONY: stack-down
stack-down: ## Stop the local stack; no process or listening port is left.
	hack/stack.sh down

.PHONY: stack-status
stack-status: ## Tell whether the local stack runs, and how to reach it.
	hack/stack.sh status

.PHONY: clean
clean: ## Remove build output.
	rm -rf $(BIN)
