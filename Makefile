.PHONY: test run bench fmt vet

GO ?= go

# Tests start their own redis-server processes (internal/testenv) unless
# ASYNCSTATUS_TEST_REDIS_ADDR / ASYNCSTATUS_TEST_CLUSTER_ADDRS point at servers
# dedicated to tests (as .ci/run does). Never point them at a Redis holding data.
test:
	$(GO) test -race -count=1 -timeout 15m ./...

run:
	$(GO) run ./cmd/asyncstatus serve

bench:
	$(GO) run ./bench/cmd/bench

fmt:
	gofmt -w .

vet:
	$(GO) vet ./...
