// Command nonreaders measures what clients that never read their answer
// cost a running sidecache: it starts an upstream that answers every GET
// with -size bytes, a sidecache binary in front of it (one cached route
// /big/{id}, the rest passed through), then opens -clients raw
// connections, each sending one GET and reading nothing, and reports the
// sidecar's RSS (VmRSS, VmHWM) once it has settled, with its connection
// metrics.
//
//	go run ./cmd/nonreaders -sidecache ../bin/sidecache -clients 400 -size 900KiB -path /big/1
//	go run ./cmd/nonreaders -sidecache ../bin/sidecache -clients 400 -max-connections 100
//	go run ./cmd/nonreaders -sidecache ../bin/sidecache -clients 400 -path '/big/{n}' -max-pending-send-bytes 16777216
//	go run ./cmd/nonreaders -sidecache ../bin/sidecache -clients 4096 -stall-header 61440
//	go run ./cmd/nonreaders -sidecache ../bin/sidecache -clients 2000 -stall-header 61440 -admin
//
// -stall-header n makes each client send the first n bytes of a header
// section (one long field line) and stall in it, instead of a whole GET
// (-admin: to the admin listener); -max-pending-header-bytes sets
// server.max_pending_header_bytes.
//
// -path /big/1 asks every client for one cached answer (L1 hit after the
// first); /pass/{n} (n: the client's number) passes each through.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

func main() {
	bin := flag.String("sidecache", "bin/sidecache", "sidecache binary")
	clients := flag.Int("clients", 400, "non-reading clients")
	size := flag.Int("size", 900<<10, "answer bytes")
	path := flag.String("path", "/big/1", "path each client asks for ({n}: its number)")
	maxConns := flag.Int("max-connections", 0, "server.max_connections (0: the binary's default, or none)")
	maxPending := flag.Int64("max-pending-send-bytes", 0, "server.max_pending_send_bytes (0: the binary's default, or none)")
	settle := flag.Duration("settle", 3*time.Second, "wait after the last client before measuring")
	idle := flag.Int("idle", 0, "idle keep-alive clients instead (one small answer read each)")
	stallHeader := flag.Int("stall-header", 0, "clients send this many bytes of a header section and stall instead")
	toAdmin := flag.Bool("admin", false, "with -stall-header: to the admin listener")
	maxHeader := flag.Int64("max-pending-header-bytes", 0, "server.max_pending_header_bytes (0: the binary's default, or none)")
	flag.Parse()

	body := strings.Repeat("x", *size)
	up := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		if strings.HasPrefix(r.URL.Path, "/small") {
			io.WriteString(w, "ok")
			return
		}
		io.WriteString(w, body)
	})}
	upLn, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	go up.Serve(upLn)

	dir, err := os.MkdirTemp("", "nonreaders")
	check(err)
	defer os.RemoveAll(dir)
	proxy, admin := freePort(), freePort()
	cfg := fmt.Sprintf(`listen: %s
admin:
  listen: %s
upstream:
  url: http://%s
cache:
  l1:
    max_bytes: 64MiB
routes:
  - name: big
    path: /big/{id}
    ttl: 5m
`, proxy, admin, upLn.Addr())
	if *maxConns > 0 || *maxPending > 0 || *maxHeader > 0 {
		cfg += "server:\n"
	}
	if *maxConns > 0 {
		cfg += fmt.Sprintf("  max_connections: %d\n", *maxConns)
	}
	if *maxPending > 0 {
		cfg += fmt.Sprintf("  max_pending_send_bytes: %d\n", *maxPending)
	}
	if *maxHeader > 0 {
		cfg += fmt.Sprintf("  max_pending_header_bytes: %d\n", *maxHeader)
	}
	file := filepath.Join(dir, "sidecache.yaml")
	check(os.WriteFile(file, []byte(cfg), 0o644))
	cmd := exec.Command(*bin, "-config", file)
	cmd.Stderr = os.Stderr
	check(cmd.Start())
	defer cmd.Process.Kill()
	for i := 0; ; i++ {
		if resp, err := http.Get("http://" + admin + "/healthz"); err == nil {
			resp.Body.Close()
			break
		}
		if i > 100 {
			log.Fatal("sidecache did not start")
		}
		time.Sleep(50 * time.Millisecond)
	}
	base := rss(cmd.Process.Pid)
	var conns []net.Conn
	for i := range max(*clients, *idle) {
		target := proxy
		if *toAdmin {
			target = admin
		}
		c, err := net.Dial("tcp", target)
		check(err)
		conns = append(conns, c)
		if *stallHeader > 0 {
			head := "GET /pass/1 HTTP/1.1\r\nHost: svc\r\nX-Pad: "
			io.WriteString(c, head+strings.Repeat("p", *stallHeader-len(head)))
			continue
		}
		if *idle > 0 {
			fmt.Fprintf(c, "GET /small/%d HTTP/1.1\r\nHost: svc\r\n\r\n", i)
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			check(err)
			io.Copy(io.Discard, resp.Body)
			continue
		}
		p := strings.ReplaceAll(*path, "{n}", strconv.Itoa(i))
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: svc\r\n\r\n", p)
	}
	time.Sleep(*settle)
	now := rss(cmd.Process.Pid)
	fmt.Printf("clients=%d idle=%d size=%d path=%s max_connections=%d max_pending_send_bytes=%d stall_header=%d admin=%v max_pending_header_bytes=%d\n", *clients, *idle, *size, *path, *maxConns, *maxPending, *stallHeader, *toAdmin, *maxHeader)
	fmt.Printf("RSS before %s, with the clients %s (%s per client over before)\n", base, now, perClient(base, now, max(*clients, *idle)))
	resp, err := http.Get("http://" + admin + "/metrics")
	check(err)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, "sidecache_client_connection") || strings.HasPrefix(l, "sidecache_client_pending_send") || strings.HasPrefix(l, `sidecache_edge_refused_total{reason="send-budget"}`) || strings.HasPrefix(l, "sidecache_client_pending_header") || strings.HasPrefix(l, `sidecache_edge_refused_total{reason="header-budget"}`) || strings.HasPrefix(l, `sidecache_edge_refused_total{reason="write-timeout"}`) || strings.HasPrefix(l, "go_memstats_heap_inuse_bytes") || strings.HasPrefix(l, "go_goroutines") {
			fmt.Println(l)
		}
	}
	resp.Body.Close()
	for _, c := range conns {
		c.Close()
	}
}

type mem struct{ rss, hwm int64 } // KiB

func (m mem) String() string { return fmt.Sprintf("VmRSS %d MiB (VmHWM %d MiB)", m.rss>>10, m.hwm>>10) }

func perClient(a, b mem, n int) string {
	return fmt.Sprintf("%d KiB", (b.rss-a.rss)/int64(n))
}

func rss(pid int) mem {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	check(err)
	defer f.Close()
	var m mem
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(fs[1], 10, 64)
		switch fs[0] {
		case "VmRSS:":
			m.rss = v
		case "VmHWM:":
			m.hwm = v
		}
	}
	return m
}

func freePort() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	defer ln.Close()
	return ln.Addr().String()
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
