# clients/typescript: the npm package @asyncstatus/client (browsers and Node 20).
# deps-typescript installs its build and test tools from package-lock.json
# (npm ci; it fails when the registry cannot be reached; no install scripts:
# esbuild's binary comes in its platform package). test-typescript
# builds the package and runs its tests (node --test) against an asyncstatus
# binary built here, on the embedded store and on a redis-server of their own,
# with Debian's Chromium for the React hook: about a minute on 2 cores.
TS_CLIENT := clients/typescript

.PHONY: deps-typescript test-typescript

deps-typescript:
	@command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || \
		{ echo 'deps-typescript: node and npm (Node.js 20) are missing: install Node.js 20 first' >&2; exit 1; }
	cd $(TS_CLIENT) && npm ci --no-audit --no-fund --ignore-scripts

test-typescript:
	@command -v node >/dev/null 2>&1 || { echo 'test-typescript: node is missing (Node.js 20)' >&2; exit 1; }
	@test -x $(TS_CLIENT)/node_modules/.bin/tsc || \
		{ echo 'test-typescript: $(TS_CLIENT)/node_modules is missing: run `make deps` (npm ci) first' >&2; exit 1; }
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	$(GO) build -o "$$tmp/asyncstatus" ./cmd/asyncstatus && \
	cd $(TS_CLIENT) && npm run --silent build && npm run --silent check && \
	ASYNCSTATUS_BIN="$$tmp/asyncstatus" npm test

TEST_TARGETS += test-typescript
DEPS_TARGETS += deps-typescript
