# Shipping asyncstatus (docs/deploy.md): release binaries, the container image
# and the image's own test.
#
#   make release [VERSION=x.y.z]   dist/asyncstatus-<os>-<arch> and dist/SHA256SUMS
#   make image [VERSION=x.y.z]     the image $(IMAGE), FROM scratch: binary + CA bundle
#   make image-test                builds the image, runs it from its exported filesystem
#                                  against a redis-server of its own; checks the
#                                  release build is reproducible (deploy/image_test.go)
.PHONY: release image image-test deps-ship

# Reproducible builds: the same commit and Go version give the same bytes on
# any machine. -trimpath drops the build machine's paths, -buildid= the
# linker's build id (a hash that also covers the paths), CGO_ENABLED=0 any C
# toolchain; -buildvcs=true records the commit, its time and whether the tree
# was modified (asyncstatus version, /healthz). GOFLAGS is pinned so that a
# user's go env cannot add flags; GOAMD64/GOARM64 are the Go defaults, pinned
# for the same reason. -s -w drop the symbol table and DWARF (a third of the
# size); panics still print full stack traces.
RELEASE_PLATFORMS ?= linux/amd64 linux/arm64 darwin/arm64
SHIP_LDFLAGS = -s -w -buildid= $(if $(VERSION),-X main.version=$(VERSION))
SHIP_BUILD = CGO_ENABLED=0 GOFLAGS=-mod=readonly GOAMD64=v1 GOARM64=v8.0 \
	$(GO) build -trimpath -buildvcs=true -ldflags '$(SHIP_LDFLAGS)'

release:
	@mkdir -p dist
	rm -f dist/asyncstatus-* dist/SHA256SUMS
	@set -e; for p in $(RELEASE_PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; \
		echo "GOOS=$$os GOARCH=$$arch $(SHIP_BUILD) -o dist/asyncstatus-$$os-$$arch ./cmd/asyncstatus"; \
		GOOS=$$os GOARCH=$$arch $(SHIP_BUILD) -o dist/asyncstatus-$$os-$$arch ./cmd/asyncstatus; \
	done
	cd dist && sha256sum asyncstatus-* > SHA256SUMS
	@cat dist/SHA256SUMS

# The image builder: the first of podman, buildah, docker found (buildah's
# verb is bud). CONTAINER_FLAGS go before the verb (podman's --root,
# --storage-driver, ...). IMAGE_ARCH is the image's (and the binary's)
# architecture: the build machine's by default.
IMAGE ?= asyncstatus:latest
IMAGE_ARCH ?= $(shell $(GO) env GOARCH)
CONTAINER_TOOL ?= $(firstword $(foreach t,podman buildah docker,$(if $(shell command -v $(t) 2>/dev/null),$(t))))
CONTAINER_FLAGS ?=
CA_BUNDLE ?= /etc/ssl/certs/ca-certificates.crt

# The labels' version and revision are read back from the binary (go version
# -m), so that they say exactly what `asyncstatus version` says. The Go
# toolchain records no revision when it finds no .git directory (a source
# tarball; also a `git worktree`, whose .git is a file): the label is then
# empty, as the binary's own record is.
image:
	@test -n "$(CONTAINER_TOOL)" || { echo 'make image: none of podman, buildah or docker is installed (make deps installs podman)' >&2; exit 1; }
	@test -r "$(CA_BUNDLE)" || { echo 'make image: no CA bundle at $(CA_BUNDLE) (apt-get install ca-certificates, or make image CA_BUNDLE=FILE)' >&2; exit 1; }
	rm -rf dist/image && mkdir -p dist/image
	GOOS=linux GOARCH=$(IMAGE_ARCH) $(SHIP_BUILD) -o dist/image/asyncstatus ./cmd/asyncstatus
	cp $(CA_BUNDLE) dist/image/ca-certificates.crt
	@set -e; \
	info=$$($(GO) version -m dist/image/asyncstatus); \
	version='$(VERSION)'; \
	[ -n "$$version" ] || version=$$(printf '%s\n' "$$info" | awk '$$1 == "mod" { print $$3 }'); \
	[ "$$version" != '(devel)' ] || version=dev; \
	revision=$$(printf '%s\n' "$$info" | sed -n 's/^[[:space:]]*build[[:space:]]*vcs.revision=//p'); \
	if [ "$$(printf '%s\n' "$$info" | sed -n 's/^[[:space:]]*build[[:space:]]*vcs.modified=//p')" = true ]; then revision="$$revision-modified"; fi; \
	verb=build; [ "$(CONTAINER_TOOL)" = buildah ] && verb=bud; \
	echo "$(CONTAINER_TOOL) $(CONTAINER_FLAGS) $$verb --platform linux/$(IMAGE_ARCH) --build-arg VERSION=$$version --build-arg REVISION=$$revision -t $(IMAGE) -f Containerfile dist/image"; \
	$(CONTAINER_TOOL) $(CONTAINER_FLAGS) $$verb --platform linux/$(IMAGE_ARCH) \
		--build-arg VERSION="$$version" --build-arg REVISION="$$revision" \
		-t $(IMAGE) -f Containerfile dist/image

# The image test needs podman (it exports the image's filesystem with podman
# create + podman export) and root (it runs the entrypoint with chroot
# --userspec). It keeps its images in a private store of its own under a
# temporary directory (podman --root/--runroot), so that it neither sees nor
# changes the machine's images; that store uses the vfs driver, which works
# in any container (overlay needs kernel support a container may lack) and
# costs nothing here: the image is one small layer. -race is not needed by
# the test, but after the Go suite (go test -race ./...) it finds its
# packages compiled in the build cache; without it they compile again.
image-test:
	@command -v podman >/dev/null 2>&1 || { echo 'make image-test: podman is missing: run make deps (apt-get install podman)' >&2; exit 1; }
	@test "$$(id -u)" = 0 || { echo 'make image-test: must run as root (chroot --userspec runs the image as 65532)' >&2; exit 1; }
	$(GO) test -race -tags imagetest -count=1 -timeout 10m -run 'TestImage|TestReleaseReproducible' -v ./deploy/

TEST_TARGETS += image-test

deps-ship:
	@missing=; \
	command -v podman >/dev/null 2>&1 || missing="$$missing podman"; \
	test -r /etc/ssl/certs/ca-certificates.crt || missing="$$missing ca-certificates"; \
	command -v systemd-analyze >/dev/null 2>&1 || missing="$$missing systemd"; \
	if [ -n "$$missing" ]; then echo "installing$$missing"; apt-get update -qq && $(APT_INSTALL) $$missing; fi

DEPS_TARGETS += deps-ship
