package lab

import (
	"context"
	"flag"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sidecache/sidecache/bench/internal/proc"
	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/cache/l1"
)

// ServeFastHit is a prototype, in the bench only, of sidecache's cached-hit
// path on valyala/fasthttp instead of net/http: GET /clients/{id} looked up
// in sidecache's own L1 store (ristretto) under a method+host+path key,
// answered from the stored entry with its headers, Age and a Cache-Status
// member; a miss is fetched from the upstream with net/http and stored for
// ttl. It measures what the server library costs on a hit, nothing more:
// no routes, Vary, conditionals, coalescing, metrics or access log. The
// bench binary runs it when started as `bench -serve-fasthit addr
// -upstream host:port`, as its own process, like every server under test.
func ServeFastHit(addr string, args []string) error {
	fs := flag.NewFlagSet("serve-fasthit", flag.ContinueOnError)
	upstream := fs.String("upstream", "", "upstream host:port")
	ttl := fs.Duration("ttl", 5*time.Minute, "time to live of a stored answer")
	if err := fs.Parse(args); err != nil {
		return err
	}
	store, err := l1.New(l1.Options{MaxBytes: 256 << 20})
	if err != nil {
		return err
	}
	defer store.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	fill := func(ctx context.Context, path string) (*cache.Entry, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+*upstream+path, nil)
		if err != nil {
			return nil, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, err
		}
		h := resp.Header.Clone()
		h.Del("Date")
		h.Del("Content-Length")
		return &cache.Entry{Status: resp.StatusCode, Header: h, Body: body, StoredAt: time.Now(), TTL: *ttl}, nil
	}
	handler := func(c *fasthttp.RequestCtx) {
		if !c.IsGet() {
			c.SetStatusCode(fasthttp.StatusMethodNotAllowed)
			return
		}
		path := c.Path()
		key := "GET\x00" + string(c.Host()) + "\x00" + string(path)
		e, ok, _ := store.Get(c, key)
		status := "sidecache; hit; detail=l1"
		if !ok || !e.Fresh(time.Now()) {
			e, err = fill(c, string(path))
			if err != nil {
				c.SetStatusCode(fasthttp.StatusBadGateway)
				c.SetBodyString("bad gateway\n")
				return
			}
			_ = store.Set(c, key, e)
			status = "sidecache; fwd=miss; stored"
		}
		h := &c.Response.Header
		for k, vs := range e.Header {
			for _, v := range vs {
				h.Add(k, v)
			}
		}
		h.Set("Age", strconv.FormatInt(int64(e.Age(time.Now())/time.Second), 10))
		h.Set("Cache-Status", status)
		c.SetStatusCode(e.Status)
		c.SetBody(e.Body)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	log.Printf("fasthit: listening on http://%s", ln.Addr())
	return (&fasthttp.Server{Handler: handler, ReadTimeout: time.Minute}).Serve(ln)
}

// startFastHit runs ServeFastHit in front of upstream.
func (l *Lab) startFastHit(ctx context.Context, upstream string) (*sut, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	port, err := proc.FreePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + itoa(port)
	pr, err := l.start("fasthit", self, "-serve-fasthit", addr, "-upstream", upstream, "-ttl", HitTTL)
	if err != nil {
		return nil, err
	}
	s := &sut{addr: addr, procs: []*proc.Proc{pr}}
	if err := pr.WaitReady(ctx, 10*time.Second, httpStatus("http://"+addr+"/clients/1", 200)); err != nil {
		l.stopSUT(s)
		return nil, err
	}
	return s, nil
}
