// Package redistest starts real redis-server processes for tests, on free
// loopback ports, and tears them down when the test ends.
//
// Tests that need Redis fail (never skip) when redis-server is missing: a
// skipped test reads as a pass in CI, and the caching behaviour that depends
// on Redis would then ship untested.
package redistest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	// pollEvery is how often readiness is re-checked: a fresh redis-server
	// answers within a few milliseconds, so a coarse poll would dominate
	// start-up time.
	pollEvery = 2 * time.Millisecond

	// readyWithin bounds how long a start may take on a loaded machine.
	readyWithin = 10 * time.Second

	// stopWithin bounds a graceful Stop before it turns into a kill.
	stopWithin = 5 * time.Second
)

// Server is one redis-server process. Its address stays the same across
// Kill and Restart, so clients configured with it reconnect by themselves.
type Server struct {
	t    testing.TB
	bin  string
	addr string
	argv []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
}

// Start runs redis-server on a free 127.0.0.1 port with persistence off and
// its working directory in t.TempDir, waits until it answers PING, and kills
// it when the test ends. Extra args are appended to the command line
// ("--maxmemory", "1mb", ...).
func Start(t testing.TB, args ...string) *Server {
	t.Helper()
	dir := t.TempDir()
	return launch(t, lookPath(t, "redis-server"), func(port int) ([]string, error) {
		return append(serverArgs(port, dir), args...), nil
	})
}

func serverArgs(port int, dir string) []string {
	return []string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", dir,
	}
}

// startClusterNode starts one cluster-enabled server. Its cluster bus port
// is probed free like its client port: by default Redis binds port+10000,
// which another process's socket may hold (in the ephemeral range, where
// the client port lies) or which does not exist (a port above 55535), and
// the node then exits. Three starts in a row failing that way made a
// cluster test fail now and then.
func startClusterNode(t testing.TB) *Server {
	t.Helper()
	dir := t.TempDir()
	return launch(t, lookPath(t, "redis-server"), func(port int) ([]string, error) {
		// Never port+10000: that it is free now says nothing of the next
		// start, and TestStartCluster tells the two choices apart by it.
		bus, err := freePort()
		for err == nil && (bus == port || bus == port+10000) {
			bus, err = freePort()
		}
		if err != nil {
			return nil, fmt.Errorf("free cluster bus port: %w", err)
		}
		return append(serverArgs(port, dir),
			"--cluster-enabled", "yes",
			"--cluster-port", strconv.Itoa(bus),
			"--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "5000",
		), nil
	})
}

// launch starts bin with the arguments argv gives for a free port, and
// kills the process when the test ends. A free port can be taken by
// another process between the probe and the server's bind, so a failed
// start is retried on a new port.
func launch(t testing.TB, bin string, argv func(port int) ([]string, error)) *Server {
	t.Helper()
	var lastErr error
	for range 3 {
		port, err := freePort()
		if err != nil {
			t.Fatalf("redistest: free port: %v", err)
		}
		args, err := argv(port)
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		s := &Server{
			t:    t,
			bin:  bin,
			addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
			argv: args,
		}
		if lastErr = s.start(); lastErr == nil {
			t.Cleanup(s.Kill)
			return s
		}
	}
	t.Fatalf("redistest: %v", lastErr)
	return nil
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.addr }

// Kill ends the process with SIGKILL, as a crash or an OOM kill would, and
// waits for it to be gone. Killing a stopped server does nothing.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
	s.cmd = nil
}

// Stop ends the process gracefully (SIGTERM) and waits for it, killing it
// if it takes longer than a few seconds.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(stopWithin):
		_ = s.cmd.Process.Signal(syscall.SIGKILL)
		<-s.exited
	}
	s.cmd = nil
}

// Pause stops the process with SIGSTOP, as a stalled host or a frozen VM
// would: its connections stay open and nothing it is sent is answered
// until Resume. Pausing a server that does not run does nothing.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume lets a paused process go on (SIGCONT).
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(sig)
	}
}

// Restart kills the process if it runs and starts a fresh one on the same
// port and directory, returning once it answers PING. With persistence off
// the new process starts empty (a cluster node keeps its nodes.conf).
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	if err := s.start(); err != nil {
		s.t.Fatalf("redistest: restart: %v", err)
	}
}

func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return fmt.Errorf("redis-server on %s already runs", s.addr)
	}

	out := &syncBuffer{}
	cmd := exec.Command(s.bin, s.argv...)
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()

	deadline := time.Now().Add(readyWithin)
	for {
		reply, err := do(s.addr, "PING")
		if err == nil && reply == "PONG" {
			break
		}
		select {
		case <-exited:
			return fmt.Errorf("redis-server on %s exited before answering PING:\n%s", s.addr, out.String())
		default:
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-exited
			return fmt.Errorf("redis-server on %s not ready after %s (last: %q, %v):\n%s",
				s.addr, readyWithin, reply, err, out.String())
		}
		time.Sleep(pollEvery)
	}
	s.cmd, s.exited = cmd, exited
	return nil
}

// Cluster is a Redis Cluster of masters without replicas.
type Cluster struct {
	nodes []*Server
}

// StartCluster starts masters (at least 3, redis-cli's minimum) cluster-enabled
// servers, joins them with redis-cli --cluster create, and returns once every
// node reports cluster_state:ok.
func StartCluster(t testing.TB, masters int) *Cluster {
	t.Helper()
	if masters < 3 {
		t.Fatalf("redistest: a cluster needs at least 3 masters, got %d", masters)
	}
	cli := lookPath(t, "redis-cli")
	c := &Cluster{}
	for range masters {
		c.nodes = append(c.nodes, startClusterNode(t))
	}

	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}

	deadline := time.Now().Add(2 * readyWithin)
	for _, n := range c.nodes {
		for {
			info, err := do(n.Addr(), "CLUSTER", "INFO")
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("redistest: cluster node %s not ok (%v):\n%s", n.Addr(), err, info)
			}
			time.Sleep(pollEvery)
		}
	}
	return c
}

// Addrs are the masters' host:port, in start order.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// Nodes are the masters, for tests that kill or restart one.
func (c *Cluster) Nodes() []*Server { return c.nodes }

func lookPath(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("redistest: %s is not on PATH (install Redis, e.g. apt-get install redis-server): %v", name, err)
	}
	return p
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// do sends one command on a fresh connection and returns a simple or bulk
// string reply. It speaks just enough RESP for readiness checks, so the
// helper does not depend on the client under test.
func do(addr string, args ...string) (string, error) {
	reply, err := command(addr, args...)
	if err != nil {
		return "", err
	}
	str, ok := reply.(string)
	if !ok {
		return "", fmt.Errorf("reply is %T, not a string", reply)
	}
	return str, nil
}

// doStrings is do for a command answering an array of strings.
func doStrings(addr string, args ...string) ([]string, error) {
	reply, err := command(addr, args...)
	if err != nil {
		return nil, err
	}
	arr, ok := reply.([]any)
	if !ok {
		return nil, fmt.Errorf("reply is %T, not an array", reply)
	}
	out := make([]string, len(arr))
	for i, v := range arr {
		if out[i], ok = v.(string); !ok {
			return nil, fmt.Errorf("array element %d is %T, not a string", i, v)
		}
	}
	return out, nil
}

func command(addr string, args ...string) (any, error) {
	conn, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(500 * time.Millisecond))

	var req bytes.Buffer
	fmt.Fprintf(&req, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&req, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write(req.Bytes()); err != nil {
		return nil, err
	}
	return readReply(bufio.NewReader(conn))
}

// readReply reads one RESP2 reply: a string (simple or bulk), an int64, or
// an array of those. A null bulk or array is an error, which is what a
// readiness check wants from a missing key or an unknown master.
func readReply(r *bufio.Reader) (any, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return nil, errors.New("empty reply")
	}
	switch line[0] {
	case '+':
		return line[1:], nil
	case '-':
		return nil, errors.New(line[1:])
	case ':':
		return strconv.ParseInt(line[1:], 10, 64)
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return nil, fmt.Errorf("bad bulk length %q", line)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return nil, fmt.Errorf("bad array length %q", line)
		}
		arr := make([]any, n)
		for i := range arr {
			if arr[i], err = readReply(r); err != nil {
				return nil, err
			}
		}
		return arr, nil
	default:
		return nil, fmt.Errorf("unexpected reply %q", line)
	}
}

// syncBuffer collects a process's output for error messages; exec writes
// to it from its own goroutine.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	// Keep only the tail: the interesting part of a failed start is last.
	if b.buf.Len() > 64<<10 {
		b.buf.Next(b.buf.Len() - 32<<10)
	}
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
