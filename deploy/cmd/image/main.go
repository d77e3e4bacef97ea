// Command image lays the static sidecache binary (and, with -demo, the
// demo-upstream one) on an empty base and writes a container image, with no Docker daemon, registry
// or base image pull: the same layout as the Dockerfile's distroless stage
// (binaries in /usr/local/bin, a non-root user 65532, the sidecar as the
// entrypoint), plus the build machine's CA bundle so an https upstream
// verifies.
//
//	image -bin DIR -version V -tar OUT.tar [-tag REF] [-layout DIR]
//
// -tar writes a docker-archive tarball (docker load, podman load, or
// crane push OUT.tar REGISTRY/sidecache:V); -layout an OCI image layout
// (skopeo copy oci:DIR docker://…). `make image` runs it.
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Where the image puts things; the Kubernetes manifests and the Dockerfile
// use the same paths.
const (
	binDir     = "usr/local/bin"
	entrypoint = "/usr/local/bin/sidecache"
	configPath = "/etc/sidecache/sidecache.yaml"
	// nonroot is distroless's "nonroot" user: numeric in the config so
	// Kubernetes' runAsNonRoot can check it without reading /etc/passwd.
	nonroot = 65532
)

type options struct {
	BinDir string // holds sidecache (and demo-upstream for Demo), built static for Arch
	// Demo adds demo-upstream: the image the example app runs, never the
	// production one (which carries the sidecar alone).
	Demo    bool
	Version string
	Arch    string
	CACerts string // CA bundle to install; "" for none
	Tag     string // the tarball's repository:tag
}

func main() {
	var o options
	var tarOut, layoutOut string
	flag.StringVar(&o.BinDir, "bin", "bin/image", "`dir` with static sidecache and demo-upstream binaries")
	flag.StringVar(&o.Version, "version", "dev", "image version label (the binaries carry their own)")
	flag.StringVar(&o.Arch, "arch", runtime.GOARCH, "the binaries' GOARCH")
	flag.StringVar(&o.CACerts, "ca-certs", "/etc/ssl/certs/ca-certificates.crt", "CA bundle to install as /etc/ssl/certs/ca-certificates.crt; empty for none")
	flag.StringVar(&o.Tag, "tag", "", "repository:tag recorded in the tarball (default sidecache:VERSION, sidecache-demo:VERSION with -demo)")
	flag.BoolVar(&o.Demo, "demo", false, "also install demo-upstream (the example app's image, not for production)")
	flag.StringVar(&tarOut, "tar", "", "write a docker-archive tarball to `file`")
	flag.StringVar(&layoutOut, "layout", "", "write an OCI image layout to `dir`")
	flag.Parse()
	if tarOut == "" && layoutOut == "" {
		fmt.Fprintln(os.Stderr, "image: nothing to write: give -tar or -layout")
		os.Exit(2)
	}
	img, err := build(o)
	if err == nil && tarOut != "" {
		err = writeTar(tarOut, o, img)
	}
	if err == nil && layoutOut != "" {
		err = writeLayout(layoutOut, img)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func writeTar(path string, o options, img v1.Image) error {
	tag := o.Tag
	if tag == "" {
		tag = title(o) + ":" + o.Version
	}
	ref, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("tag: %w", err)
	}
	return tarball.WriteToFile(path, ref, img)
}

func writeLayout(dir string, img v1.Image) error {
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("layout: %w", err)
	}
	return p.AppendImage(img)
}

// binaries are the commands the image installs.
func binaries(o options) []string {
	if o.Demo {
		return []string{"sidecache", "demo-upstream"}
	}
	return []string{"sidecache"}
}

func title(o options) string {
	if o.Demo {
		return "sidecache-demo"
	}
	return "sidecache"
}

func description(o options) string {
	if o.Demo {
		return "sidecache with its demo upstream, for examples; not for production"
	}
	return "Reverse-proxy caching sidecar with a two-tier (in-process + Redis) cache"
}

// build returns the image: one layer on an empty base, and a config whose
// timestamps are fixed, so the same binaries give the same digest.
func build(o options) (v1.Image, error) {
	layer, err := rootfs(o)
	if err != nil {
		return nil, err
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layer)), nil
	})
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", o.Arch
	cf.Config = v1.Config{
		Entrypoint:   []string{entrypoint},
		Cmd:          []string{"-config", configPath},
		User:         fmt.Sprintf("%d:%d", nonroot, nonroot),
		WorkingDir:   "/",
		Env:          []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
		ExposedPorts: map[string]struct{}{"8080/tcp": {}, "9090/tcp": {}}, // proxy, admin
		Labels: map[string]string{
			"org.opencontainers.image.title":       title(o),
			"org.opencontainers.image.description": description(o),
			"org.opencontainers.image.version":     o.Version,
		},
	}
	return mutate.ConfigFile(img, cf)
}

// rootfs is the image's one layer as an uncompressed tar.
func rootfs(o options) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	dir := func(path string, mode int64, uid int) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: path + "/", Mode: mode, Uid: uid, Gid: uid, ModTime: epoch})
	}
	file := func(path string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: path, Mode: mode, Size: int64(len(data)), ModTime: epoch}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	for _, d := range []struct {
		path string
		mode int64
		uid  int
	}{
		{"etc", 0o755, 0}, {"etc/sidecache", 0o755, 0}, {"etc/ssl", 0o755, 0}, {"etc/ssl/certs", 0o755, 0},
		{"home", 0o755, 0}, {"home/nonroot", 0o700, nonroot},
		{"tmp", 0o1777, 0}, {"usr", 0o755, 0}, {"usr/local", 0o755, 0}, {binDir, 0o755, 0},
	} {
		if err := dir(d.path, d.mode, d.uid); err != nil {
			return nil, err
		}
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", nonroot, nonroot)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", nonroot)
	if err := file("etc/passwd", 0o644, []byte(passwd)); err != nil {
		return nil, err
	}
	if err := file("etc/group", 0o644, []byte(group)); err != nil {
		return nil, err
	}
	if o.CACerts != "" {
		certs, err := os.ReadFile(o.CACerts)
		if err != nil {
			return nil, fmt.Errorf("ca certs: %w", err)
		}
		if err := file("etc/ssl/certs/ca-certificates.crt", 0o644, certs); err != nil {
			return nil, err
		}
	}
	for _, b := range binaries(o) {
		data, err := os.ReadFile(filepath.Join(o.BinDir, b))
		if err != nil {
			return nil, fmt.Errorf("binary: %w", err)
		}
		if err := file(binDir+"/"+b, 0o755, data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
