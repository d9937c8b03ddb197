# Cairn: durable workflows on asynq and Redis. `make help` lists the targets.
GO      ?= go
PKGS    ?= ./...
BIN     ?= bin

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-8s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: run
run: ## Run the worker on the embedded, non-durable store (CAIRN_REDIS_URL unset)
	env -u CAIRN_REDIS_URL $(GO) run ./cmd/worker

.PHONY: build
build: ## Build the worker and the CLI into ./bin
	$(GO) build -o $(BIN)/ ./cmd/worker ./cmd/enqueue

.PHONY: test
test: ## Run every test with the race detector (needs redis-server on PATH), then the fuzz targets briefly
	$(GO) test -race -count=1 -timeout 10m $(PKGS)
	$(GO) test -run='^$$' -fuzz=FuzzParse -fuzztime=5s ./workflow/yamldef/
	$(GO) test -run='^$$' -fuzz=FuzzRender -fuzztime=5s ./workflow/httpstep/

.PHONY: chaos
chaos: ## Chaos suite: 2000 runs, 3 workers killed at random, a Redis restart (CHAOS_RUNS=n)
	CAIRN_CHAOS_RUNS=$(or $(CHAOS_RUNS),2000) $(GO) test -race -count=1 -timeout 30m -run '^TestChaos$$' -v ./internal/e2e/

.PHONY: bench
bench: ## Benchmark Cairn step chains against raw asynq task chains
	$(GO) test -run '^$$' -bench . -benchtime 1x -count 1 -timeout 15m ./bench/

STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: lint
lint: ## gofmt, go vet, staticcheck (all checks), and golangci-lint when it is installed
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) run $(STATICCHECK) -checks all $(PKGS)
	@if command -v golangci-lint >/dev/null 2>&1; then golangci-lint run $(PKGS); else echo "golangci-lint not installed; skipped"; fi
