package proxy_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/route"
)

// Prober H7: a field a qualified private or no-cache names (RFC 9111
// §5.2.2.7, §5.2.2.4) was withheld only from what the tiers stored; an
// answer not stored (max-age=0, or no-cache without a validator) went to
// the requests collapsed onto its fetch with the field, so other clients
// got the fetching client's X-Secret. The origin writes the caller's
// address (X-Forwarded-For) into the field; three clients from three
// addresses ask at once: none may see the field (stored or not, the
// fetching client's answer is the stored one's, without it).
func TestWithheldFieldNeverReachesCollapsedClients(t *testing.T) {
	var hold atomic.Pointer[chan struct{}]
	arrived := make(chan struct{}, 16)
	ccs := map[string]string{
		"1": `max-age=0, private="X-Secret"`,
		"2": `max-age=0, no-cache="X-Secret"`,
		"3": `no-cache, private="X-Secret"`,
		"4": `max-age=60, private="X-Secret"`,
		"5": `no-cache="X-Secret"`, // the route-mode row: not stored, still shared
	}
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if release := hold.Swap(nil); release != nil {
			arrived <- struct{}{}
			held(t, *release)
		}
		id := r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
		w.Header().Set("Cache-Control", ccs[id])
		w.Header().Set("X-Secret", "secret-of-"+r.Header.Get("X-Forwarded-For"))
		fmt.Fprint(w, "body")
	})
	routes := []testRoute{
		{Name: "o", Pattern: "/o/{id}", TTL: 30 * time.Second, Origin: &route.Origin{}},
		{Name: "r", Pattern: "/r/{id}", TTL: 30 * time.Second},
	}
	e := newEnv(t, up, routes, withRedis(t))
	var joined, finished atomic.Int64
	withJoinCount(e, &joined, &finished)
	for _, path := range []string{"/o/1", "/o/2", "/o/3", "/o/4", "/r/5"} {
		release := make(chan struct{})
		hold.Store(&release)
		joined.Store(0)
		var wg sync.WaitGroup
		ask := func(ip string) {
			defer wg.Done()
			resp, _ := getWith(t, from(t, ip), e.front.URL+path, nil)
			if v := resp.Header.Values("X-Secret"); len(v) > 0 {
				t.Errorf("%s: client %s got X-Secret %q (%s)", path, ip, v, cacheStatus(resp))
			}
		}
		wg.Add(1)
		go ask("127.0.0.2")
		await(t, arrived)
		for _, ip := range []string{"127.0.0.3", "127.0.0.4"} {
			wg.Add(1)
			go ask(ip)
		}
		waitFor(t, func() bool { return joined.Load() >= 3 }) // the fetcher's wait and the two collapsed
		close(release)
		wg.Wait()
	}
}
