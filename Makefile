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

# VERSION is the version the binaries report with --version, set at link
# time for a release: make build VERSION=v1.2.0. Empty: the version the Go
# toolchain records (the module's, else the VCS revision; cmd/internal/version).
VERSION ?=

.PHONY: build
build: ## Build the worker and the CLI into ./bin (VERSION=v1.2.0 sets what --version says)
	$(GO) build -ldflags '-X github.com/cairnhq/cairn/cmd/internal/version.Version=$(VERSION)' -o $(BIN)/ ./cmd/worker ./cmd/enqueue

.PHONY: deps
deps: ## Install what the tests need when missing (redis-server, chromium, docker-compose, promtool, make: apt-get, as root or with sudo)
	@GO='$(GO)' sh scripts/deps.sh

.PHONY: test
test: deps ## Run every test with the race detector (make deps first), then the fuzz targets briefly
	sh scripts/deps_test.sh
	$(GO) test -race -count=1 -timeout 10m $(PKGS)
	@# A count, not a duration: a -fuzztime duration races Go's fuzz coordinator
	@# (go.dev/issue/75804, fixed in Go 1.27) and can fail with a bare
	@# "context deadline exceeded" and no crasher on a loaded machine.
	$(GO) test -run='^$$' -fuzz=FuzzParse -fuzztime=20000x ./workflow/yamldef/
	$(GO) test -run='^$$' -fuzz=FuzzRender -fuzztime=20000x ./workflow/httpstep/
	$(GO) test -run='^$$' -fuzz=FuzzCheckJSON -fuzztime=20000x ./workflow/

.PHONY: compose-check
compose-check: ## Check docker-compose.yml with docker-compose (apt-get install docker-compose; no daemon needed)
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && touch "$$tmp/env" && \
	echo "docker-compose -f docker-compose.yml config -q   (CAIRN_DASHBOARD_SECRET set to a placeholder)" && \
	CAIRN_DASHBOARD_SECRET=placeholder-of-compose-check docker-compose --env-file "$$tmp/env" -f docker-compose.yml config -q && \
	echo "docker-compose -f docker-compose.yml config -q   (CAIRN_DASHBOARD_SECRET unset: must be refused)" && \
	if env -u CAIRN_DASHBOARD_SECRET docker-compose --env-file "$$tmp/env" -f docker-compose.yml config -q 2>"$$tmp/err"; then \
		echo "docker-compose.yml: accepted without CAIRN_DASHBOARD_SECRET; it must require it"; exit 1; fi && \
	{ grep -q CAIRN_DASHBOARD_SECRET "$$tmp/err" || { cat "$$tmp/err"; exit 1; }; }

.PHONY: chaos
chaos: ## Chaos suite: 2000 runs, 3 workers killed at random, a Redis restart (CHAOS_RUNS=n)
	CAIRN_CHAOS_RUNS=$(or $(CHAOS_RUNS),2000) $(GO) test -race -count=1 -timeout 30m -run '^TestChaos$$' -v ./cmd/internal/e2e/

.PHONY: bench
bench: ## Cairn against raw asynq end to end (ratio strict), bytes/run, the reconciler and retained runs at scale (CAIRN_BENCH_RETAINED_RUNS=1000000 for the full million)
	$(GO) test -run '^$$' -bench . -skip '^BenchmarkScale$$' -benchtime 1x -count 1 -timeout 20m ./bench/

.PHONY: bench-scale
bench-scale: ## Steps/s and CPU per step with 1, 2, 4 worker processes, and on a 3-master Redis Cluster
	$(GO) test -run '^$$' -bench '^BenchmarkScale$$' -benchtime 1x -count 1 -timeout 20m ./bench/

# The lint tools, pinned. `make tools` installs them with `go install` into
# TOOLS_BIN (skipped when the pinned version is there already); `make lint`
# fails when either is missing or at another version.
GOLANGCI_LINT_VERSION ?= v2.15.0
GOVULNCHECK_VERSION   ?= v1.9.0
TOOLS_BIN ?= $(firstword $(subst :, ,$(shell $(GO) env GOPATH)))/bin
# govulncheck's vulnerability database; a local copy: GOVULNDB=file:///path
GOVULNDB ?= https://vuln.go.dev

# tool = name, module, package within the module, version
GOLANGCI_LINT := golangci-lint,github.com/golangci/golangci-lint/v2,/cmd/golangci-lint,$(GOLANGCI_LINT_VERSION)
GOVULNCHECK   := govulncheck,golang.org/x/vuln,/cmd/govulncheck,$(GOVULNCHECK_VERSION)
tool_name = $(word 1,$(subst $(comma), ,$(1)))
tool_mod  = $(word 2,$(subst $(comma), ,$(1)))
tool_pkg  = $(word 2,$(subst $(comma), ,$(1)))$(word 3,$(subst $(comma), ,$(1)))
tool_ver  = $(word 4,$(subst $(comma), ,$(1)))
comma := ,

# have_tool: a shell test that TOOLS_BIN holds the tool, built from its
# module at its pinned version.
have_tool = [ "$$($(GO) version -m $(TOOLS_BIN)/$(call tool_name,$(1)) 2>/dev/null | \
	awk '$$1 == "mod" { print $$2 "@" $$3 }')" = "$(call tool_mod,$(1))@$(call tool_ver,$(1))" ]
install_cmd = GOBIN=$(TOOLS_BIN) $(GO) install $(call tool_pkg,$(1))@$(call tool_ver,$(1))

.PHONY: tools
tools: ## Install the pinned golangci-lint and govulncheck into TOOLS_BIN (skipped when there)
	@if $(call have_tool,$(GOLANGCI_LINT)); then echo "golangci-lint $(GOLANGCI_LINT_VERSION): installed"; \
	else echo "$(call install_cmd,$(GOLANGCI_LINT))"; $(call install_cmd,$(GOLANGCI_LINT)); fi
	@if $(call have_tool,$(GOVULNCHECK)); then echo "govulncheck $(GOVULNCHECK_VERSION): installed"; \
	else echo "$(call install_cmd,$(GOVULNCHECK))"; $(call install_cmd,$(GOVULNCHECK)); fi

# need_tool fails, with the install command, unless the tool is installed.
need_tool = if ! $(call have_tool,$(1)); then \
	echo "$(call tool_name,$(1)) $(call tool_ver,$(1)) is not installed in $(TOOLS_BIN): run make tools"; \
	echo "  (or: $(call install_cmd,$(1)))"; exit 1; fi

# govulncheck exits 3 on a vulnerability and 1 on any other error. The one
# error let through is a vulnerability database that cannot be reached over
# the network (a machine without access to it, as some CI machines are): it
# is said loudly, as nothing was checked. Any other failure fails.
define run_govulncheck
out=$$($(TOOLS_BIN)/govulncheck -db $(GOVULNDB) $(PKGS) 2>&1); rc=$$?; \
if [ $$rc -ne 0 ] && [ $$rc -ne 3 ] && printf '%s\n' "$$out" | grep -Eq \
	'^govulncheck: fetching vulnerabilities: .*(dial tcp|no such host|connection refused|network is unreachable|i/o timeout|TLS handshake timeout|connection reset by peer)'; then \
	printf '%s\n' "$$out"; \
	echo "*************************************************************************"; \
	echo "* govulncheck: the vulnerability database $(GOVULNDB) is UNREACHABLE:"; \
	echo "* NOTHING WAS CHECKED for known vulnerabilities. Run make lint where it"; \
	echo "* is reachable, or point GOVULNDB at a local copy (file:///path)."; \
	echo "*************************************************************************"; \
else \
	printf '%s\n' "$$out"; exit $$rc; \
fi
endef

.PHONY: lint
lint: ## gofmt, go vet, golangci-lint (.golangci.yml) and govulncheck, at the pinned versions
	@$(call need_tool,$(GOLANGCI_LINT))
	@$(call need_tool,$(GOVULNCHECK))
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(TOOLS_BIN)/golangci-lint run $(PKGS)
	@echo "$(TOOLS_BIN)/govulncheck -db $(GOVULNDB) $(PKGS)"
	@$(run_govulncheck)

.PHONY: vulncheck
vulncheck: ## govulncheck alone (part of lint)
	@$(call need_tool,$(GOVULNCHECK))
	@echo "$(TOOLS_BIN)/govulncheck -db $(GOVULNDB) $(PKGS)"
	@$(run_govulncheck)
