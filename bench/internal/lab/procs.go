package lab

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proc is one child process. Its output goes to a log file in the run's
// temp dir, quoted when it fails to start.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

// startProc starts a child that dies with the bench (Pdeathsig), so an
// interrupted run leaves nothing listening.
func startProc(dir, name string, env []string, argv ...string) (*proc, error) {
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("%s: log: %w", name, err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...) // later entries win
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: start %s: %w", name, argv[0], err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// stop asks the child to finish (SIGTERM), then kills it after 5s.
func (p *proc) stop() {
	if p == nil {
		return
	}
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// tail is the end of the child's log, for error messages.
func (p *proc) tail() string {
	b, _ := os.ReadFile(p.log)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// waitReady polls check until it succeeds, the child exits or timeout.
func (p *proc) waitReady(ctx context.Context, timeout time.Duration, check func(context.Context) error) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		if p.exited() {
			return fmt.Errorf("%s exited during start (%v); log %s:\n%s", p.name, p.err, p.log, p.tail())
		}
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		last = check(cctx)
		cancel()
		if last == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready after %v: %v; log %s:\n%s", p.name, timeout, last, p.log, p.tail())
}

// freePort asks the kernel for a port that is free now. Another process
// could take it before the child binds; on a bench machine that does not
// happen in practice, and the child's start check would say so.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// httpDo is one control call (reset, counts, purge, readiness, prefill),
// bounded to 10s.
func httpDo(ctx context.Context, method, url string, hdr http.Header) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return 0, nil, err
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// httpStatus is a ready check: url answers with one of the statuses.
func httpStatus(url string, want ...int) func(context.Context) error {
	return func(ctx context.Context) error {
		code, body, err := httpDo(ctx, "GET", url, nil)
		if err != nil {
			return err
		}
		for _, w := range want {
			if code == w {
				return nil
			}
		}
		return fmt.Errorf("GET %s: %d %s", url, code, bytes.TrimSpace(body))
	}
}

// redisCmd sends one inline command and returns the first reply line;
// enough for PING and FLUSHALL without a client library.
func redisCmd(ctx context.Context, addr, cmd string) (string, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, cmd+"\r\n"); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSpace(line)
	if strings.HasPrefix(line, "-") {
		return "", errors.New("redis: " + line[1:])
	}
	return line, nil
}

// demoClient talks to the demo upstream's own control endpoints, never
// through a proxy.
type demoClient struct{ base string }

func (d demoClient) counts(ctx context.Context) (map[string]int64, error) {
	code, body, err := httpDo(ctx, "GET", d.base+"/_demo/counts", nil)
	if err != nil {
		return nil, fmt.Errorf("demo counts: %w", err)
	}
	if code != 200 {
		return nil, fmt.Errorf("demo counts: status %d", code)
	}
	var m map[string]int64
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("demo counts: %w", err)
	}
	return m, nil
}

func (d demoClient) reset(ctx context.Context) error {
	code, _, err := httpDo(ctx, "POST", d.base+"/_demo/reset", nil)
	if err == nil && code != 204 {
		err = fmt.Errorf("status %d", code)
	}
	if err != nil {
		return fmt.Errorf("demo reset: %w", err)
	}
	return nil
}

// upstreamDelta sums the calls between two count snapshots.
func upstreamDelta(before, after map[string]int64) (total int64, per map[string]int64) {
	per = map[string]int64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			per[k] = d
			total += d
		}
	}
	return total, per
}

func itoa(i int) string { return strconv.Itoa(i) }
