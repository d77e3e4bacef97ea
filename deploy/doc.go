// Package deploy holds no code: it is the home of the tests that keep the
// deployment artefacts beside it (kubernetes/, grafana/, prometheus/, and
// the repository's Dockerfile) honest.
//
// It is a Go module of its own so that the Kubernetes, kustomize and
// Prometheus modules its tests need never enter the main module's go.mod.
// The tests render every kustomization with the kustomize API, decode the
// objects strictly into the Kubernetes API types, load the sidecar config
// found in the rendered ConfigMap with sidecache's own config loader, and
// check that ports, probes, scrape settings and metric names agree across
// the files:
//
//	cd deploy && go test ./...
package deploy
