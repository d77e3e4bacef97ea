# Two commands set everything up on a fresh machine: `make run` and `make test`
# (`make test-all` adds the deploy and bench modules, as CI does).
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
BIN     := bin

# soak-invariants: the invariant harness (internal/invariant), seed after seed,
# for DURATION; INVARIANT_FEATURES=all puts every gated feature in the mix.
.PHONY: soak-invariants
DURATION ?= 10m
soak-invariants:
	INVARIANT_SOAK=$(DURATION) $(GO) test -count=1 -run '^TestSoak$$' -timeout 0 -v ./internal/invariant

.PHONY: run test test-all build vet fmt-check tidy-check lint test-go test-timing test-deploy test-bench bench bench-quick bench-cpu bench-fleet image image-demo image-engine clean

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/sidecache ./cmd/sidecache
	$(GO) build -trimpath -o $(BIN)/demo-upstream ./cmd/demo-upstream

# The demo upstream on :3000 and the sidecar (L1-only, config/sidecache.yaml)
# on :8080 (admin :9090) in front of it; Ctrl-C stops both. Ports:
#   make run PORT=8081 UPSTREAM_PORT=3001 ADMIN_PORT=9091
PORT          ?= 8080
UPSTREAM_PORT ?= 3000
ADMIN_PORT    ?= 9090
run: build
	@PORT=$(PORT) UPSTREAM_PORT=$(UPSTREAM_PORT) ADMIN_PORT=$(ADMIN_PORT) ./scripts/run-demo.sh $(BIN)

# `make test` checks the sidecar's own module: what a change to it needs
# before a commit. The deploy and bench modules are other modules with
# heavy dependencies (Kubernetes, Prometheus, kustomize, go-containerregistry;
# vegeta): from an empty module cache they alone took 8 of 17 minutes.
# `make test-all` (what .ci/run runs) adds them; run it, or
# `make test-deploy`, after touching deploy/, bench/, metrics or the image.
test: vet fmt-check tidy-check test-go test-timing

test-all: test test-deploy test-bench

vet:
	$(GO) vet ./...

# go.mod and go.sum are exactly what `go mod tidy` writes (this module
# here; deploy's and bench's in their own targets).
tidy-check:
	$(GO) mod tidy -diff

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# Extra static analysis (not part of `make test`: it fetches staticcheck).
lint:
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

# The invariant package is the longest: about 400 s under -race on two idle
# cores, 870 s on two shared with other builds; the timeout is a hang guard.
test-go:
	$(GO) test -race -timeout 25m ./...

# The integration packages again without -race: the race detector slows
# them enough to hide timing-dependent behaviour (it once hid an idle
# replica that never noticed Redis was gone).
test-timing:
	$(GO) test -count=1 -timeout 10m ./internal/server ./internal/cache/l2 ./internal/proxy ./cmd/sidecache

test-deploy:
	cd deploy && $(GO) mod tidy -diff && $(GO) vet ./... && $(GO) test -timeout 10m ./...

# The benchmark is its own module (bench/go.mod), so its load generator
# (vegeta) is no requirement of the sidecar's module.
test-bench:
	cd bench && $(GO) mod tidy -diff && $(GO) vet ./... && $(GO) test -timeout 10m ./...

$(BIN)/bench: FORCE
	cd bench && $(GO) build -o ../$(BIN)/bench ./cmd/bench

# A full run writes the committed report in bench/results; the quick one is a
# smoke run and writes under bin/ (untracked), never over a committed report.
BENCH_QUICK_OUT ?= $(BIN)/bench-quick
bench: build $(BIN)/bench
	$(BIN)/bench -out bench/results

bench-quick: build $(BIN)/bench
	BENCH_QUICK=1 $(BIN)/bench -out $(BENCH_QUICK_OUT)

# CPU µs per request at a fixed 3,000 req/s for sidecache and the
# installed peers — hit, pass-through, batched miss, split, L2 hit (with
# Redis's CPU): bench/results/cpu-latest.md (≈ 12 min; 16 min with CPU_BEFORE). Some rows only:
# make bench-cpu CPU_ARGS='-cpu-rows batch,split,l2'.
# CPU_BEFORE=<rev> also measures a sidecache built from that commit
# (git archive into a temp dir), e.g. make bench-cpu CPU_BEFORE=16d946c.
CPU_BEFORE ?=
bench-cpu: build $(BIN)/bench
	@set -e; extra=""; \
	if [ -n "$(CPU_BEFORE)" ]; then \
	  tmp=$$(mktemp -d); git archive $(CPU_BEFORE) | tar -x -C $$tmp; \
	  (cd $$tmp && $(GO) build -trimpath -o $(CURDIR)/$(BIN)/sidecache-$(CPU_BEFORE) ./cmd/sidecache); rm -rf $$tmp; \
	  extra="-cpu-sidecars before-$(CPU_BEFORE)=$(BIN)/sidecache-$(CPU_BEFORE)"; \
	fi; \
	$(BIN)/bench -cpu -out bench/results $$extra $(CPU_ARGS)

# Coherence across a fleet (bench/README.md): real replicas plus emulated
# peers on one Redis, FLEET-<stamp>-own.md in bench/results (≈ 1.5 min).
# FLEET_BEFORE=<rev> also runs the shared-channel protocol with a sidecache
# built from that commit, e.g. make bench-fleet FLEET_BEFORE=16d946c.
FLEET_NS ?= 10,200,500,1000
FLEET_BEFORE ?=
bench-fleet: build $(BIN)/bench
	@set -e; \
	if [ -n "$(FLEET_BEFORE)" ]; then \
	  tmp=$$(mktemp -d); git archive $(FLEET_BEFORE) | tar -x -C $$tmp; \
	  (cd $$tmp && $(GO) build -trimpath -o $(CURDIR)/$(BIN)/sidecache-$(FLEET_BEFORE) ./cmd/sidecache); rm -rf $$tmp; \
	  $(BIN)/bench -fleet 10,50,200,400 -fleet-protocol shared -sidecache $(BIN)/sidecache-$(FLEET_BEFORE) -fleet-label "$(FLEET_BEFORE) (before)" -out bench/results; \
	fi; \
	$(BIN)/bench -fleet $(FLEET_NS) -fleet-label "$$(git rev-parse --short HEAD)" -out bench/results

# The image without a daemon: static binaries laid on an empty base by
# deploy/cmd/image (go-containerregistry), written as a docker-archive
# tarball (docker/podman load, crane push) and an OCI layout.
# IMAGE_ARCH=arm64 cross-builds. `make image-engine` builds the Dockerfile
# with docker, podman or buildah (CONTAINER_ENGINE=podman).
IMAGE_ARCH       ?= $(shell $(GO) env GOARCH)
IMAGE_REPO       ?= sidecache
CONTAINER_ENGINE ?= docker
image:
	CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_ARCH) $(GO) build -trimpath -buildvcs=false \
	  -ldflags '$(LDFLAGS)' -o $(BIN)/image/$(IMAGE_ARCH)/ ./cmd/sidecache ./cmd/demo-upstream
	cd deploy && $(GO) run ./cmd/image -bin ../$(BIN)/image/$(IMAGE_ARCH) -arch $(IMAGE_ARCH) \
	  -version $(VERSION) -tag $(IMAGE_REPO):$(VERSION) \
	  -tar ../$(BIN)/sidecache-$(VERSION)-$(IMAGE_ARCH).tar -layout ../$(BIN)/oci/sidecache-$(VERSION)-$(IMAGE_ARCH)
	@echo "image: $(BIN)/sidecache-$(VERSION)-$(IMAGE_ARCH).tar ($(IMAGE_REPO):$(VERSION))"

# The example app's image: the sidecar plus demo-upstream (never production).
image-demo: image
	cd deploy && $(GO) run ./cmd/image -demo -bin ../$(BIN)/image/$(IMAGE_ARCH) -arch $(IMAGE_ARCH) \
	  -version $(VERSION) -tag $(IMAGE_REPO)-demo:$(VERSION) \
	  -tar ../$(BIN)/sidecache-demo-$(VERSION)-$(IMAGE_ARCH).tar
	@echo "image: $(BIN)/sidecache-demo-$(VERSION)-$(IMAGE_ARCH).tar ($(IMAGE_REPO)-demo:$(VERSION))"

image-engine:
	$(CONTAINER_ENGINE) build --build-arg VERSION=$(VERSION) -t $(IMAGE_REPO):$(VERSION) .
	$(CONTAINER_ENGINE) build --target demo --build-arg VERSION=$(VERSION) -t $(IMAGE_REPO)-demo:$(VERSION) .

FORCE:

clean:
	rm -rf $(BIN)
