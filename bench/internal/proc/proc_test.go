package proc

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestStartStop: a child logs to dir/name.log with env added, Stop ends
// it (SIGTERM), and Stop on a stopped or nil child does nothing.
func TestStartStop(t *testing.T) {
	dir := t.TempDir()
	p, err := Start(dir, "sleeper", []string{"BENCH_PROC_TEST=hello"}, "sh", "-c", `echo "$BENCH_PROC_TEST"; exec sleep 60`)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.WaitReady(context.Background(), 10*time.Second, func(context.Context) error {
		if p.Tail() != "hello" {
			return errors.New("no greeting yet")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if p.Exited() || p.Pid() <= 0 {
		t.Fatalf("running child: exited %v pid %d", p.Exited(), p.Pid())
	}
	p.Stop()
	if !p.Exited() {
		t.Fatal("child still running after Stop")
	}
	p.Stop()
	var none *Proc
	none.Stop()
}

// TestWaitReadyExited: a child that exits during start is reported with
// its log, at once rather than at the timeout.
func TestWaitReadyExited(t *testing.T) {
	p, err := Start(t.TempDir(), "quitter", nil, "sh", "-c", "echo bad flag; exit 3")
	if err != nil {
		t.Fatal(err)
	}
	err = p.WaitReady(context.Background(), time.Minute, func(context.Context) error { return errors.New("not yet") })
	if err == nil || !strings.Contains(err.Error(), "quitter exited during start") || !strings.Contains(err.Error(), "bad flag") {
		t.Fatalf("WaitReady: %v", err)
	}
}

// TestStartMissing: a binary that is not there is an error naming it.
func TestStartMissing(t *testing.T) {
	if _, err := Start(t.TempDir(), "ghost", nil, "/nonexistent/ghost"); err == nil || !strings.Contains(err.Error(), "ghost: start /nonexistent/ghost") {
		t.Fatalf("Start: %v", err)
	}
}

// TestFreePort: the port is free to listen on; FreePorts gives n of them.
func TestFreePort(t *testing.T) {
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	ports, err := FreePorts(3)
	if err != nil || len(ports) != 3 || ports[0] <= 0 || ports[1] <= 0 || ports[2] <= 0 {
		t.Fatalf("FreePorts(3): %v, %v", ports, err)
	}
}
