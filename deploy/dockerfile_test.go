package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDockerfile checks the image recipe without a Docker engine: what it
// builds exists, it builds the way the issue asks (static, trimmed,
// versioned), runs as non-root, and agrees with the Kubernetes manifests on
// the binaries' paths and the config path.
func TestDockerfile(t *testing.T) {
	data, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(data)
	for _, want := range []string{
		"CGO_ENABLED=0",
		"-trimpath",
		"-X main.version=${VERSION}",
		"./cmd/sidecache",
		"./cmd/demo-upstream",
		"FROM gcr.io/distroless/static",
		`ENTRYPOINT ["/usr/local/bin/sidecache"]`,
		`CMD ["-config", "/etc/sidecache/sidecache.yaml"]`,
	} {
		if !strings.Contains(df, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	// Every base image is fully qualified (registry host first), so
	// podman and buildah, which have no implicit docker.io, build it too.
	for _, m := range regexp.MustCompile(`(?m)^FROM\s+(?:--\S+\s+)*(\S+)`).FindAllStringSubmatch(df, -1) {
		host, _, path := strings.Cut(m[1], "/")
		if !path || !strings.ContainsAny(host, ".:") && host != "localhost" {
			t.Errorf("FROM %s: want a fully qualified name (docker.io/library/…, gcr.io/…)", m[1])
		}
	}
	// The final stage (the default target, what production builds) is the
	// sidecar alone; the demo upstream is only in the "demo" target.
	last := df[strings.LastIndex(df, "\nFROM "):]
	if strings.Contains(last, "demo-upstream") {
		t.Error("the Dockerfile's final (production) stage installs demo-upstream")
	}
	if !regexp.MustCompile(`(?m)^FROM \S+ AS demo$`).MatchString(df) {
		t.Error("the Dockerfile has no demo target for the example app")
	}
	// The final stage's user: numeric and not root, so the kubelet can
	// enforce runAsNonRoot.
	users := regexp.MustCompile(`(?m)^USER\s+(\S+)`).FindAllStringSubmatch(df, -1)
	if len(users) == 0 {
		t.Errorf("Dockerfile sets no USER")
	} else if u := users[len(users)-1][1]; !regexp.MustCompile(`^[1-9][0-9]*(:[0-9]+)?$`).MatchString(u) {
		t.Errorf("final USER %q: want a numeric non-root uid", u)
	}
	// What is built must exist in the main module, and the ldflags must
	// name the variable cmd/sidecache really has.
	for _, dir := range []string{"../cmd/sidecache", "../cmd/demo-upstream"} {
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("Dockerfile builds %s: %v", dir, err)
		}
	}
	mains, _ := filepath.Glob("../cmd/sidecache/*.go")
	found := false
	for _, f := range mains {
		src, _ := os.ReadFile(f)
		found = found || regexp.MustCompile(`(?m)^\s*(var\s+)?version\s+=`).Match(src)
	}
	if !found {
		t.Errorf("cmd/sidecache has no package-level version variable for -X main.version")
	}
	// Everything COPY'd from the context must survive .dockerignore's
	// allow-list.
	ignore, err := os.ReadFile("../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`(?m)^COPY\s+([^-\s][^\n]*)\s+\S+$`).FindAllStringSubmatch(df, -1) {
		for _, src := range strings.Fields(m[1]) {
			if !strings.Contains(string(ignore), "!"+strings.TrimSuffix(src, "/")) {
				t.Errorf("COPY %s: .dockerignore does not allow it into the context", src)
			}
		}
	}
	// The manifests run the binaries where the image puts them.
	for _, f := range []string{exampleBase + "/deployment.yaml", componentDir + "/sidecar.yaml"} {
		y, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, bin := range regexp.MustCompile(`/usr/local/bin/[a-z-]+`).FindAllString(string(y), -1) {
			if !strings.Contains(df, filepath.Base(bin)) {
				t.Errorf("%s runs %s, which the image does not install", f, bin)
			}
		}
	}
}
