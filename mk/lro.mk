# The standard long-running-operation clients (internal/lrotest; docs/client.md,
# "Using a standard LRO client"): @azure/core-lro from npm, installed from the
# exact package-lock.json, and azure-core from Debian's python3-azure, which
# only Debian's /usr/bin/python3 imports. Their Go tests run in the Go suite
# (`make test-go`) and fail, never skip, when these are missing.
DEPS_TARGETS += deps-lro
.PHONY: deps-lro

LRO_JS := internal/lrotest/js

deps-lro:
	@missing=; \
	command -v node >/dev/null 2>&1 || missing="$$missing nodejs"; \
	command -v npm >/dev/null 2>&1 || missing="$$missing npm"; \
	/usr/bin/python3 -c 'import azure.core' >/dev/null 2>&1 || missing="$$missing python3-azure"; \
	if [ -n "$$missing" ]; then echo "installing$$missing"; apt-get update -qq && $(APT_INSTALL) $$missing; fi
	cd $(LRO_JS) && npm ci --no-audit --no-fund --loglevel=error
