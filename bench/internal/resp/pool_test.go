package resp

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/sidecache/sidecache/internal/redistest"
)

// TestPoolGet: Pool.Get reads values binary-safe, tells a missing key from
// an empty value, returns an error reply as an error, and keeps using the
// connection it has instead of dialling per command.
func TestPoolGet(t *testing.T) {
	rs := redistest.Start(t)
	c, err := Dial(context.Background(), rs.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	big := strings.Repeat("x\r\n", 3000) // longer than the reader's buffer
	for k, v := range map[string]string{"k": "a\r\nb", "empty": "", "big": big} {
		if _, err := c.Do("SET", k, v); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Do("RPUSH", "list", "x"); err != nil {
		t.Fatal(err)
	}
	before := connsReceived(t, c)
	p := NewPool(rs.Addr())
	defer p.Close()
	for range 3 {
		for _, tc := range []struct {
			key, want string
			ok        bool
		}{{"k", "a\r\nb", true}, {"empty", "", true}, {"big", big, true}, {"missing", "", false}} {
			v, ok, err := p.Get(tc.key)
			if err != nil || ok != tc.ok || string(v) != tc.want {
				t.Fatalf("Get(%q) = %q, %v, %v; want %q, %v", tc.key, v, ok, err, tc.want, tc.ok)
			}
		}
	}
	if _, _, err := p.Get("list"); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Fatalf("GET of a list: %v, want the WRONGTYPE error", err)
	}
	// The failed connection was dropped; the next Get dials a new one.
	if v, ok, err := p.Get("k"); err != nil || !ok || string(v) != "a\r\nb" {
		t.Fatalf("Get after an error reply: %q, %v, %v", v, ok, err)
	}
	// 14 sequential GETs on one connection: the pool dialled twice, the
	// dropped connection and its replacement.
	if got := connsReceived(t, c) - before; got != 2 {
		t.Errorf("the pool dialled %d connections, want 2", got)
	}
}

// TestPoolConcurrent: concurrent Gets each get their own connection and
// their own key's value; at most as many connections as concurrent Gets.
func TestPoolConcurrent(t *testing.T) {
	rs := redistest.Start(t)
	c, err := Dial(context.Background(), rs.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const n = 8
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "k" + strings.Repeat("i", i+1)
		if _, err := c.Do("SET", keys[i], strings.Repeat("v", 100*(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	before := connsReceived(t, c)
	p := NewPool(rs.Addr())
	defer p.Close()
	var wg sync.WaitGroup
	errs := make(chan string, n*50)
	for i := range n {
		wg.Go(func() {
			for range 50 {
				v, ok, err := p.Get(keys[i])
				if err != nil || !ok || len(v) != 100*(i+1) {
					errs <- keys[i]
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for k := range errs {
		t.Errorf("a concurrent Get of %s read the wrong value", k)
	}
	if got := connsReceived(t, c) - before; got < 1 || got > n {
		t.Errorf("the pool dialled %d connections, want 1..%d", got, n)
	}
}

// connsReceived is INFO stats total_connections_received.
func connsReceived(t *testing.T, c *Conn) int {
	t.Helper()
	v, err := c.Do("INFO", "stats")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(v.(string)) {
		if n, ok := strings.CutPrefix(strings.TrimSpace(line), "total_connections_received:"); ok {
			var x int
			for _, ch := range n {
				x = x*10 + int(ch-'0')
			}
			return x
		}
	}
	t.Fatal("INFO stats lacks total_connections_received")
	return 0
}
