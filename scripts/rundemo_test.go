// Package scripts holds the tests of the shell scripts beside them.
package scripts

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// buildDemo builds the two binaries run-demo.sh starts into a temp dir.
func buildDemo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, pkg := range []string{"./cmd/sidecache", "./cmd/demo-upstream"} {
		cmd := exec.Command("go", "build", "-o", dir, pkg)
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	return dir
}

// freePort returns a port nothing listens on (as of now).
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// occupy holds a port with a plain HTTP server: the "wrong service".
func occupy(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "not the demo")
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

func runDemo(t *testing.T, bin string, port, upstream, admin int) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("./scripts/run-demo.sh", bin)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port),
		fmt.Sprintf("UPSTREAM_PORT=%d", upstream), fmt.Sprintf("ADMIN_PORT=%d", admin))
	// Its own process group, so cleanup can stop whatever it left.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	t.Cleanup(func() {
		if cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	})
	return cmd
}

func listening(port int) bool {
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err == nil {
		c.Close()
	}
	return err == nil
}

// TestRunDemoStopsWhenAPortIsTaken: with the demo upstream's port (or the
// sidecar's) held by another service, the script exits non-zero, names the
// port, prints no hints, and leaves no sidecar proxying to that service.
func TestRunDemoStopsWhenAPortIsTaken(t *testing.T) {
	bin := buildDemo(t)
	for _, which := range []string{"upstream", "proxy"} {
		t.Run(which, func(t *testing.T) {
			port, upstream, admin := freePort(t), freePort(t), freePort(t)
			taken := occupy(t)
			if which == "upstream" {
				upstream = taken
			} else {
				port = taken
			}
			cmd := runDemo(t, bin, port, upstream, admin)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			if code := cmd.ProcessState.ExitCode(); err == nil || code != 1 {
				t.Fatalf("exit %d (%v), want 1\nstdout:\n%s\nstderr:\n%s", code, err, &stdout, &stderr)
			}
			if want := fmt.Sprintf("is port %d", taken); !strings.Contains(stderr.String(), want) {
				t.Errorf("stderr does not say %q:\n%s", want, &stderr)
			}
			if strings.Contains(stdout.String(), "curl") {
				t.Errorf("hints printed although nothing runs:\n%s", &stdout)
			}
			if which == "upstream" && (listening(port) || listening(admin)) {
				t.Errorf("a sidecar listens on :%d or :%d after the upstream failed", port, admin)
			}
			if !listening(taken) {
				t.Errorf("the other service on :%d was disturbed", taken)
			}
		})
	}
}

// TestRunDemoServesOnTheChosenPorts: the hints appear once both listen,
// on the ports asked for, and the proxy then caches the demo's answers;
// SIGTERM stops both processes.
func TestRunDemoServesOnTheChosenPorts(t *testing.T) {
	bin := buildDemo(t)
	var (
		port, upstream, admin int
		cmd                   *exec.Cmd
		stderr                bytes.Buffer
		hints                 string
	)
	// A free port is free as of freePort's return only: another test's
	// outgoing connection may take it as its local port before the demo
	// binds it (the script then says so and exits). That, and only that,
	// is tried again with other ports.
	for attempt := 1; ; attempt++ {
		port, upstream, admin = freePort(t), freePort(t), freePort(t)
		cmd = runDemo(t, bin, port, upstream, admin)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		stderr.Reset()
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var ok bool
		if hints, ok = scanUntil(out, "Ctrl-C stops both"); ok {
			break
		}
		_ = cmd.Wait()
		if attempt == 3 || !strings.Contains(stderr.String(), "address already in use") {
			t.Fatalf("output ended before %q:\n%s\nstderr:\n%s", "Ctrl-C stops both", hints, &stderr)
		}
		t.Logf("attempt %d: a port was taken before the demo bound it; again with others:\n%s", attempt, &stderr)
	}
	for _, want := range []string{
		fmt.Sprintf("curl -i http://127.0.0.1:%d/clients/42", port),
		fmt.Sprintf("curl -s http://127.0.0.1:%d/metrics", admin),
	} {
		if !strings.Contains(hints, want) {
			t.Errorf("hints lack %q:\n%s", want, hints)
		}
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/clients/42", port)
	var statuses []string
	for range 2 {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatalf("GET %s right after the hints: %v\nstderr:\n%s", url, err, &stderr)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		statuses = append(statuses, resp.Header.Get("Cache-Status"))
	}
	if !strings.Contains(statuses[0], "stored") || !strings.Contains(statuses[1], "hit") {
		t.Errorf("Cache-Status %q, want a stored miss then a hit", statuses)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("script still running 60s after SIGTERM")
	}
	for _, p := range []int{port, upstream, admin} {
		if listening(p) {
			t.Errorf("something still listens on :%d after the script ended", p)
		}
	}
}

// scanUntil reads r's lines until one holds marker (true), then keeps r
// drained; false with what it read when r ends first.
func scanUntil(r io.Reader, marker string) (string, bool) {
	var b strings.Builder
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		b.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), marker) {
			go io.Copy(io.Discard, r) // keep the pipe drained
			return b.String(), true
		}
	}
	return b.String(), false
}
