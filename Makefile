# `make` alone prints this help. The targets a user runs install nothing: `make deps`
# (which CI runs) installs the Debian packages the whole test suite needs.
.DEFAULT_GOAL := help
.PHONY: help deps deps-base test test-go run build console-screenshots bench bench-redis fmt vet

GO ?= go

# Each room of the project (a client, the image, the history test) adds its own
# targets in mk/<room>.mk: TEST_TARGETS gathers what `make test` runs besides the
# Go suite, DEPS_TARGETS what `make deps` installs.
TEST_TARGETS :=
DEPS_TARGETS :=
-include mk/*.mk

help:
	@echo 'asyncstatus: make targets'
	@echo '  make run      build bin/asyncstatus and run `serve` (embedded store when no Redis is configured)'
	@echo '  make test     the whole test suite: the Go suite (-race) and $(or $(TEST_TARGETS),nothing else)'
	@echo '  make deps     install with apt-get what the tests need (redis-server, chromium, ...); CI runs it'
	@echo '  make build    bin/asyncstatus (make build VERSION=x.y.z stamps a release version)'
	@echo '  make bench    the load benchmark against the yardstick (docs/performance.md)'
	@echo '  make fmt vet  gofmt -w and go vet'

# Tests start their own redis-server processes (internal/testenv) unless
# ASYNCSTATUS_TEST_REDIS_ADDR / ASYNCSTATUS_TEST_CLUSTER_ADDRS point at servers
# dedicated to tests (as .ci/run does). Never point them at a Redis holding data.
test: test-go $(TEST_TARGETS)

test-go:
	@command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1 || \
		{ echo 'make test: redis-server and redis-cli are missing: run `make deps` (apt-get) first' >&2; exit 1; }
	@test -x /usr/bin/chromium || \
		{ echo 'make test: /usr/bin/chromium is missing (the browser tests drive it): run `make deps` first' >&2; exit 1; }
	$(GO) test -race -count=1 -timeout 15m ./...

APT_INSTALL = DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends
deps: deps-base $(DEPS_TARGETS)

deps-base:
	@missing=; \
	command -v redis-server >/dev/null 2>&1 || missing="$$missing redis-server"; \
	command -v redis-cli >/dev/null 2>&1 || missing="$$missing redis-tools"; \
	test -x /usr/bin/chromium || missing="$$missing chromium"; \
	if [ -n "$$missing" ]; then echo "installing$$missing"; apt-get update -qq && $(APT_INSTALL) $$missing; fi

# Built and exec'd rather than `go run`: go run exits 1 after Ctrl-C even when
# serve stopped cleanly, and make then reports an error.
run:
	$(GO) build -buildvcs=auto -o bin/asyncstatus ./cmd/asyncstatus
	exec bin/asyncstatus serve

# bin/asyncstatus, naming its git revision (asyncstatus version, /healthz,
# asyncstatus_build_info). `make build VERSION=0.2.0` stamps a release version.
# -buildvcs=true because a machine's go env may turn the default off.
VERSION ?=
build:
	$(GO) build -buildvcs=true $(if $(VERSION),-ldflags "-X main.version=$(VERSION)") -o bin/asyncstatus ./cmd/asyncstatus

# Rewrites the README's console screenshots (docs/console-*.png) from the browser test.
console-screenshots:
	ASYNCSTATUS_UPDATE_DOCS=1 $(GO) test -count=1 -run 'TestBrowserTenantAdmin/miniredis' ./internal/console/

bench:
	$(GO) run ./bench/cmd/bench $(BENCHFLAGS)

# Redis's own cost per call, in instructions (callgrind): repeatable on a noisy
# machine, unlike timings. About 20 s; needs valgrind (apt-get install valgrind).
bench-redis:
	@command -v valgrind >/dev/null 2>&1 || { echo 'valgrind is missing: apt-get install valgrind' >&2; exit 1; }
	ASYNCSTATUS_BENCH_METER=callgrind $(GO) test -run XXX -bench BenchmarkRedisCost -benchtime 1000x ./internal/store/

fmt:
	gofmt -w .

vet:
	$(GO) vet ./...
