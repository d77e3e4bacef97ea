package lab

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/sidecache/sidecache/bench/internal/resp"
	"github.com/sidecache/sidecache/internal/demo"
	"github.com/sidecache/sidecache/internal/redistest"
)

// TestBareRedisMode: the bare server's Redis mode stores the records it
// serves from memory in Redis first, then answers each GET /clients/{id}
// with exactly the from-memory answer, reading the body with one Redis GET
// per request; an id it does not serve costs no GET, and a key gone from
// Redis is an error, not an empty answer.
func TestBareRedisMode(t *testing.T) {
	const records = 30
	rs := redistest.Start(t)
	fromRedis, err := bareHandler(records, rs.Addr())
	if err != nil {
		t.Fatal(err)
	}
	fromMemory, err := bareHandler(records, "")
	if err != nil {
		t.Fatal(err)
	}
	redisSrv, memSrv := httptest.NewServer(fromRedis), httptest.NewServer(fromMemory)
	defer redisSrv.Close()
	defer memSrv.Close()
	ctx := context.Background()

	v, err := resp.Do(ctx, rs.Addr(), "GET", BareRedisKey(7))
	if want, _, _ := demo.Record("clients", 7, records); err != nil || v != string(want) {
		t.Fatalf("Redis holds %q under %s (%v), want the demo's record %q", v, BareRedisKey(7), err, want)
	}
	before := redisGets(t, rs.Addr())
	for id := 1; id <= records; id++ {
		path := "/clients/" + strconv.Itoa(id)
		got, want := fetch(t, redisSrv.URL+path), fetch(t, memSrv.URL+path)
		if got != want || !strings.HasPrefix(got, "200 ") {
			t.Fatalf("GET %s from Redis:\n%s\nfrom memory:\n%s", path, got, want)
		}
	}
	if got := redisGets(t, rs.Addr()) - before; got != records {
		t.Errorf("%d requests made %d Redis GETs, want one each", records, got)
	}
	before = redisGets(t, rs.Addr())
	if got := fetch(t, redisSrv.URL+"/clients/"+strconv.Itoa(records+1)); !strings.HasPrefix(got, "404 ") {
		t.Errorf("an id past the records: %s", got)
	}
	if got := redisGets(t, rs.Addr()) - before; got != 0 {
		t.Errorf("an id past the records made %d Redis GETs", got)
	}
	if _, err := resp.Do(ctx, rs.Addr(), "DEL", BareRedisKey(3)); err != nil {
		t.Fatal(err)
	}
	if got := fetch(t, redisSrv.URL+"/clients/3"); !strings.HasPrefix(got, "502 ") {
		t.Errorf("a record gone from Redis: %s", got)
	}
}

// fetch is the status, the headers the bare server sets and the body.
func fetch(t *testing.T, url string) string {
	t.Helper()
	r, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	if r.StatusCode != 200 {
		return r.Status
	}
	return r.Status + "\n" + strings.Join([]string{r.Header.Get("Content-Type"), r.Header.Get("Content-Length"), r.Header.Get("Etag")}, "|") + "\n" + string(b)
}

// redisGets is how many GETs Redis has run (INFO commandstats).
func redisGets(t *testing.T, addr string) int {
	t.Helper()
	v, err := resp.Do(context.Background(), addr, "INFO", "commandstats")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(v.(string)) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_get:calls="); ok {
			n, _, _ := strings.Cut(rest, ",")
			calls, err := strconv.Atoi(n)
			if err != nil {
				t.Fatal(err)
			}
			return calls
		}
	}
	return 0 // no GET yet
}
