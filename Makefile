.PHONY: test run bench fmt vet tools

GO ?= go

# Tests start their own redis-server processes (internal/testenv) unless
# ASYNCSTATUS_TEST_REDIS_ADDR / ASYNCSTATUS_TEST_CLUSTER_ADDRS point at servers
# dedicated to tests (as .ci/run does). Never point them at a Redis holding data.
test: tools
	$(GO) test -race -count=1 -timeout 15m ./...

# The tests start real redis-server processes; install it on a fresh Debian machine.
tools:
	@command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1 || \
		{ echo "installing redis-server (tests need it)"; \
		  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-tools; }

run:
	$(GO) run ./cmd/asyncstatus serve

bench:
	$(GO) run ./bench/cmd/bench $(BENCHFLAGS)

fmt:
	gofmt -w .

vet:
	$(GO) vet ./...
