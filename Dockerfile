# syntax=docker/dockerfile:1
#
# sidecache image: the sidecar and the demo upstream, both static, on
# distroless/static as a non-root user. The example Kubernetes app runs
# /usr/local/bin/demo-upstream from this same image.
#
#   docker build --build-arg VERSION=$(git describe --tags --always) -t sidecache:dev .
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

# distroless/static: CA certificates, tzdata and /etc/passwd with the
# "nonroot" user (65532), and nothing else — no shell, no package manager.
FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
LABEL org.opencontainers.image.title="sidecache" \
      org.opencontainers.image.description="Reverse-proxy caching sidecar with a two-tier (in-process + Redis) cache" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /out/sidecache /out/demo-upstream /usr/local/bin/
# Numeric, so Kubernetes' runAsNonRoot can verify it without a passwd lookup.
USER 65532:65532
# 8080: proxy listener, 9090: admin (/metrics, /healthz, /readyz).
EXPOSE 8080 9090
ENTRYPOINT ["/usr/local/bin/sidecache"]
CMD ["-config", "/etc/sidecache/sidecache.yaml"]
