package main

import (
	"archive/tar"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

const testVersion = "v9.9.9-imagetest"

// staticBinaries builds the two commands as `make image` does: static,
// trimmed, with the version stamped in.
func staticBinaries(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X main.version="+testVersion,
		"-o", dir+"/", "./cmd/sidecache", "./cmd/demo-upstream")
	cmd.Dir = "../../.." // the main module
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return dir
}

// TestImageRunsTheSidecarAsNonRoot builds the image to a tarball, reads
// it back as any client would, and checks the entrypoint, the command, the
// user (numeric, non-root, known to /etc/passwd), and that the sidecache
// binary taken out of the image runs and reports its version.
func TestImageRunsTheSidecarAsNonRoot(t *testing.T) {
	bin := staticBinaries(t)
	img, err := build(options{BinDir: bin, Version: testVersion, Arch: runtime.GOARCH})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "image.tar")
	if err := writeTar(out, options{Version: testVersion}, img); err != nil {
		t.Fatal(err)
	}
	if err := writeLayout(filepath.Join(t.TempDir(), "oci"), img); err != nil {
		t.Fatal(err)
	}

	tag, _ := name.NewTag("sidecache:" + testVersion)
	loaded, err := tarball.ImageFromPath(out, &tag)
	if err != nil {
		t.Fatalf("read back %s: %v", out, err)
	}
	cf, err := loaded.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if !slices.Equal(c.Entrypoint, []string{"/usr/local/bin/sidecache"}) {
		t.Errorf("entrypoint %q", c.Entrypoint)
	}
	if !slices.Equal(c.Cmd, []string{"-config", "/etc/sidecache/sidecache.yaml"}) {
		t.Errorf("cmd %q", c.Cmd)
	}
	if c.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532 (numeric, non-root)", c.User)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s", cf.OS, cf.Architecture)
	}
	if got := c.Labels["org.opencontainers.image.version"]; got != testVersion {
		t.Errorf("version label %q", got)
	}

	files := map[string][]byte{}
	modes := map[string]int64{}
	tr := tar.NewReader(mutate.Extract(loaded))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		files[h.Name], modes[h.Name] = b, h.Mode
	}
	if !strings.Contains(string(files["etc/passwd"]), ":65532:65532:") {
		t.Errorf("/etc/passwd names no user 65532:\n%s", files["etc/passwd"])
	}
	if modes["usr/local/bin/sidecache"]&0o005 != 0o005 {
		t.Errorf("sidecache: mode %o, want readable and executable by any user", modes["usr/local/bin/sidecache"])
	}
	if _, ok := files["usr/local/bin/demo-upstream"]; ok {
		t.Error("the production image ships demo-upstream")
	}
	exe := filepath.Join(t.TempDir(), "sidecache")
	if err := os.WriteFile(exe, files["usr/local/bin/sidecache"], 0o755); err != nil {
		t.Fatal(err)
	}
	v, err := exec.Command(exe, "-version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(v), "sidecache "+testVersion+" ") {
		t.Errorf("sidecache -version from the image: %q, %v; want it to start with %q", v, err, "sidecache "+testVersion)
	}
}

// TestDemoImageAddsTheDemoUpstream (issue 22, item 6): -demo is the
// example app's image: both binaries, named sidecache-demo.
func TestDemoImageAddsTheDemoUpstream(t *testing.T) {
	bin := t.TempDir()
	for _, b := range []string{"sidecache", "demo-upstream"} {
		if err := os.WriteFile(filepath.Join(bin, b), []byte("#!"+b), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, demo := range []bool{false, true} {
		img, err := build(options{BinDir: bin, Version: "v1", Arch: "amd64", Demo: demo})
		if err != nil {
			t.Fatal(err)
		}
		names := map[string]bool{}
		tr := tar.NewReader(mutate.Extract(img))
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			names[h.Name] = true
		}
		cf, _ := img.ConfigFile()
		if names["usr/local/bin/demo-upstream"] != demo || !names["usr/local/bin/sidecache"] {
			t.Errorf("demo=%v: binaries %v", demo, names)
		}
		if want := map[bool]string{false: "sidecache", true: "sidecache-demo"}[demo]; cf.Config.Labels["org.opencontainers.image.title"] != want {
			t.Errorf("demo=%v: title %q, want %q", demo, cf.Config.Labels["org.opencontainers.image.title"], want)
		}
	}
}

// TestImageIsReproducible: the same binaries give the same digest, so a
// rebuilt release tag is recognisably the same image.
func TestImageIsReproducible(t *testing.T) {
	bin := t.TempDir()
	for _, b := range []string{"sidecache", "demo-upstream"} {
		if err := os.WriteFile(filepath.Join(bin, b), []byte("#!"+b), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var digests []string
	for range 2 {
		img, err := build(options{BinDir: bin, Version: "v1", Arch: "amd64"})
		if err != nil {
			t.Fatal(err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, d.String())
	}
	if digests[0] != digests[1] {
		t.Errorf("two builds of the same input: %v", digests)
	}
}
