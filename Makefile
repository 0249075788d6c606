.PHONY: test run build console-screenshots bench bench-redis fmt vet tools

GO ?= go

# Tests start their own redis-server processes (internal/testenv) unless
# ASYNCSTATUS_TEST_REDIS_ADDR / ASYNCSTATUS_TEST_CLUSTER_ADDRS point at servers
# dedicated to tests (as .ci/run does). Never point them at a Redis holding data.
test: tools
	$(GO) test -race -count=1 -timeout 15m ./...

# The tests start real redis-server processes and drive headless Chromium;
# install them on a fresh Debian machine.
tools:
	@command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1 || \
		{ echo "installing redis-server (tests need it)"; \
		  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-tools; }
	@test -x /usr/bin/chromium || \
		{ echo "installing chromium (the browser test needs it)"; \
		  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }

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
# machine, unlike timings. About 20 s; needs valgrind (installed if missing).
bench-redis: tools
	@command -v valgrind >/dev/null 2>&1 || { echo "installing valgrind"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind; }
	ASYNCSTATUS_BENCH_METER=callgrind $(GO) test -run XXX -bench BenchmarkRedisCost -benchtime 1000x ./internal/store/

fmt:
	gofmt -w .

vet:
	$(GO) vet ./...
