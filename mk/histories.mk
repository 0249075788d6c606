# The history test (internal/histories, docs/reliability.md): concurrent clients of
# several `serve` processes on a single Redis, a Sentinel pair and a Cluster, faults
# injected, every history checked against a model of the lifecycle. `go test ./...`
# (CI) runs its short version; `make histories` the long one (about 4 minutes, without
# -race so that more operations fit), writing its log and porcupine's visualisation of
# any history that is not linearizable to $(HISTORIES_DIR). Not part of `make test`.
.PHONY: histories
HISTORIES_DIR ?= $(CURDIR)/bin/histories

histories:
	@command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1 || \
		{ echo 'make histories: redis-server and redis-cli are missing: run `make deps` (apt-get) first' >&2; exit 1; }
	@mkdir -p $(HISTORIES_DIR)
	@ASYNCSTATUS_HISTORIES_LONG=1 ASYNCSTATUS_HISTORIES_DIR=$(HISTORIES_DIR) \
		$(GO) test -count=1 -timeout 20m -v -run 'TestHistory' ./internal/histories/ >$(HISTORIES_DIR)/histories.log 2>&1; \
	status=$$?; \
	grep -E '^(=== RUN|--- |PASS|FAIL|ok)|history |anomaly|negative control|promoted|killed at|porcupine' $(HISTORIES_DIR)/histories.log; \
	echo "make histories: full log in $(HISTORIES_DIR)/histories.log"; \
	exit $$status
