# syntax=docker/dockerfile:1
#
# sidecache image: the sidecar, static, on distroless/static as a non-root
# user. The last stage is the production image and the default target; the
# "demo" target adds the demo upstream (/usr/local/bin/demo-upstream), which
# the example Kubernetes app runs, and is never what production pulls.
#
#   docker build --build-arg VERSION=$(git describe --tags --always) -t sidecache:dev .
#   docker build --target demo --build-arg VERSION=… -t sidecache-demo:dev .
#   podman build (or buildah bud) takes the same arguments: every base image
#   name is fully qualified, so no registry search list is consulted.
#   Without any engine: make image (deploy/cmd/image).

ARG GO_VERSION=1.26.8

# The build stage runs on the builder's own platform and cross-compiles, so a
# multi-arch build (docker buildx --platform linux/amd64,linux/arm64) needs no
# emulation: CGO is off and Go cross-compiles natively.
FROM --platform=$BUILDPLATFORM docker.io/library/golang:${GO_VERSION} AS build
WORKDIR /src

# Modules first: this layer stays cached until go.mod or go.sum change.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download

COPY cmd ./cmd
COPY internal ./internal

ARG VERSION=dev
ARG TARGETOS
ARG TARGETARCH
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -buildvcs=false \
      -ldflags="-s -w -X main.version=${VERSION}" \
      -o /out/ ./cmd/sidecache ./cmd/demo-upstream

# The demo image: the sidecar plus the demo upstream, for the example app
# (deploy/kubernetes/example) and a kind or minikube trial.
FROM gcr.io/distroless/static-debian12:nonroot AS demo
ARG VERSION=dev
LABEL org.opencontainers.image.title="sidecache-demo" \
      org.opencontainers.image.description="sidecache with its demo upstream, for examples; not for production" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /out/sidecache /out/demo-upstream /usr/local/bin/
USER 65532:65532
EXPOSE 8080 9090 3000
ENTRYPOINT ["/usr/local/bin/sidecache"]
CMD ["-config", "/etc/sidecache/sidecache.yaml"]

# The production image (the default target): the sidecar alone.
# distroless/static: CA certificates, tzdata and /etc/passwd with the
# "nonroot" user (65532), and nothing else — no shell, no package manager.
FROM gcr.io/distroless/static-debian12:nonroot AS sidecache
ARG VERSION=dev
LABEL org.opencontainers.image.title="sidecache" \
      org.opencontainers.image.description="Reverse-proxy caching sidecar with a two-tier (in-process + Redis) cache" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /out/sidecache /usr/local/bin/
# Numeric, so Kubernetes' runAsNonRoot can verify it without a passwd lookup.
USER 65532:65532
# 8080: proxy listener, 9090: admin (/metrics, /healthz, /readyz).
EXPOSE 8080 9090
ENTRYPOINT ["/usr/local/bin/sidecache"]
CMD ["-config", "/etc/sidecache/sidecache.yaml"]
