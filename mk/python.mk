# The Python client (clients/python): its tests run against a real `serve`
# (embedded store, and redis-server processes of their own) built here, and
# install the package into a fresh venv with Debian's /usr/bin/python3.
# About 40-80 s on two cores, most of it the venv and pip.
.PHONY: test-python deps-python typecheck-python
TEST_TARGETS += test-python
DEPS_TARGETS += deps-python

# The interpreter of the unit tests: the python3 on PATH (any 3.9 or later).
PYTHON ?= python3
# Debian's packages for the venv + pip install test (no package index is reachable),
# and openssl for the https test's certificate.
PYTHON_DEBS := python3 python3-venv python3-pip python3-setuptools python3-wheel openssl

test-python:
	@command -v $(PYTHON) >/dev/null 2>&1 || \
		{ echo 'make test-python: $(PYTHON) is missing: run `make deps` (apt-get install python3)' >&2; exit 1; }
	@command -v redis-server >/dev/null 2>&1 || \
		{ echo 'make test-python: redis-server is missing: run `make deps`' >&2; exit 1; }
	@dpkg -s $(PYTHON_DEBS) >/dev/null 2>&1 || \
		{ echo 'make test-python: the venv test needs $(PYTHON_DEBS): run `make deps`' >&2; exit 1; }
	@d=$$(mktemp -d) && trap 'rm -rf "$$d"' EXIT && \
		$(GO) build -o "$$d/asyncstatus" ./cmd/asyncstatus && \
		cd clients/python/tests && ASYNCSTATUS_BIN="$$d/asyncstatus" $(PYTHON) -m unittest -v

deps-python:
	@missing=; for p in $(PYTHON_DEBS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then echo "installing$$missing"; apt-get update -qq && $(APT_INSTALL) $$missing; fi

# By hand (not in CI): mypy --strict against Python 3.9, the oldest version the
# package supports. Debian's mypy: apt-get install mypy.
typecheck-python:
	@command -v mypy >/dev/null 2>&1 || { echo 'make typecheck-python: mypy is missing: apt-get install mypy' >&2; exit 1; }
	cd clients/python/src && mypy --strict --python-version 3.9 -p asyncstatus
	cd clients/python/examples && MYPYPATH=../src mypy --strict --python-version 3.9 worker.py wait_for_export.py
