package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// configMapDir lays out a config as a Kubernetes ConfigMap volume does:
// dir/sidecache.yaml -> ..data/sidecache.yaml, ..data -> ..<version>. An
// update writes a new version directory and renames a fresh symlink over
// ..data, so the file path never changes and no file is written in place.
type configMapDir struct {
	t       *testing.T
	dir     string
	version int
}

func newConfigMapDir(t *testing.T, content string) *configMapDir {
	d := &configMapDir{t: t, dir: t.TempDir()}
	d.swap(content)
	if err := os.Symlink(filepath.Join("..data", "sidecache.yaml"), d.path()); err != nil {
		t.Fatal(err)
	}
	return d
}

func (d *configMapDir) path() string { return filepath.Join(d.dir, "sidecache.yaml") }

// swap publishes content as the next version, atomically.
func (d *configMapDir) swap(content string) {
	d.t.Helper()
	d.version++
	version := fmt.Sprintf("..2026_11_22_00_00_%02d.%d", d.version, 1000+d.version)
	writeFile(d.t, filepath.Join(d.dir, version, "sidecache.yaml"), content)
	tmp := filepath.Join(d.dir, "..data_tmp")
	if err := os.Symlink(version, tmp); err != nil {
		d.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(d.dir, "..data")); err != nil {
		d.t.Fatal(err)
	}
}

var ttlParam = regexp.MustCompile(`; ttl=(\d+)`)

// hitTTL stores a never-requested client and returns the ttl= of the hit
// that follows: the TTL the route had when the entry was stored.
func hitTTL(t *testing.T, c *http.Client, sc *sidecache, id int) int {
	t.Helper()
	url := sc.proxy + "/clients/" + strconv.Itoa(id)
	if r := get(t, c, url); r.code != 200 || !strings.Contains(r.header.Get("Cache-Status"), "stored") {
		t.Fatalf("GET %s: %d, Cache-Status %q; want a stored miss", url, r.code, r.header.Get("Cache-Status"))
	}
	return cachedTTL(t, c, url)
}

// cachedTTL returns the ttl= of a hit on url.
func cachedTTL(t *testing.T, c *http.Client, url string) int {
	t.Helper()
	r := get(t, c, url)
	cs := r.header.Get("Cache-Status")
	m := ttlParam.FindStringSubmatch(cs)
	if r.code != 200 || !strings.Contains(cs, "hit") || m == nil {
		t.Fatalf("GET %s: %d, Cache-Status %q; want a hit with a ttl", url, r.code, cs)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// load keeps GETs going from a few goroutines until stopped, counting every
// answer that is not a 200.
type load struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	ok     atomic.Int64
	mu     sync.Mutex
	failed []string
}

func startLoad(proxyURL string, workers int) *load {
	ctx, cancel := context.WithTimeout(context.Background(), 2*within)
	l := &load{cancel: cancel}
	c := &http.Client{Timeout: within, Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	for w := range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				url := fmt.Sprintf("%s/clients/%d", proxyURL, 1+(w*7+i)%50)
				r, err := fetch(c, url)
				switch {
				case err != nil && ctx.Err() != nil:
					return
				case err != nil:
					l.fail(err.Error())
				case r.code != 200:
					l.fail(fmt.Sprintf("GET %s: %d %s", url, r.code, r.body))
				default:
					l.ok.Add(1)
				}
			}
		}()
	}
	return l
}

func (l *load) fail(msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failed = append(l.failed, msg)
}

// stop ends the load and fails the test if any request failed.
func (l *load) stop(t *testing.T) {
	t.Helper()
	l.cancel()
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.failed) > 0 {
		t.Errorf("%d of %d requests failed during reloads; first: %s", len(l.failed), int(l.ok.Load())+len(l.failed), l.failed[0])
	}
	if l.ok.Load() < 100 {
		t.Errorf("only %d requests served during the reloads: the load did not run", l.ok.Load())
	}
}

// TestHotReload: a ConfigMap-style update changes a route's TTL under load
// without a failed request; a broken update keeps the running config; and
// SIGHUP reloads on demand. The binary uses the default 2s watch interval.
func TestHotReload(t *testing.T) {
	_, demoURL := startDemo(t)
	cm := newConfigMapDir(t, fmt.Sprintf(configTmpl, demoURL, "5m"))
	sc := startSidecache(t, cm.path())
	c := &http.Client{Timeout: within}
	reloads := func(result string) float64 {
		return sc.metricValue(t, "sidecache_config_reloads_total", "result", result)
	}

	fresh := 1000 // client IDs never requested before
	next := func() int { fresh++; return fresh }
	if ttl := hitTTL(t, c, sc, next()); ttl < 250 || ttl > 300 {
		t.Fatalf("ttl=%d under the 5m config, want about 300", ttl)
	}
	old := fmt.Sprintf("%s/clients/%d", sc.proxy, fresh)

	l := startLoad(sc.proxy, 4)
	defer l.cancel()
	time.Sleep(300 * time.Millisecond) // some load before the swap

	t.Run("ttl change", func(t *testing.T) {
		cm.swap(fmt.Sprintf(configTmpl, demoURL, "5s"))
		deadline := time.Now().Add(within)
		for hitTTL(t, c, sc, next()) > 5 {
			if time.Now().After(deadline) {
				t.Fatalf("new entries still stored with the 5m TTL %v after the swap", within)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if got := reloads("success"); got != 1 {
			t.Errorf(`config_reloads_total{result="success"} = %v, want 1`, got)
		}
		// A reload swaps routes, not the cache: the old entry is still
		// there with the TTL it was stored with.
		if ttl := cachedTTL(t, c, old); ttl < 200 {
			t.Errorf("entry stored before the reload: ttl=%d, want its 5m TTL kept", ttl)
		}
	})

	t.Run("sighup", func(t *testing.T) {
		sc.signal(t, syscall.SIGHUP) // the file is unchanged: only SIGHUP reloads it
		sc.waitMetric(t, 2, "sidecache_config_reloads_total", "result", "success")
	})

	t.Run("broken update", func(t *testing.T) {
		broken := strings.Replace(fmt.Sprintf(configTmpl, demoURL, "10m"), "    ttl:", "    bogus: 1\n    ttl:", 1)
		cm.swap(broken)
		sc.waitMetric(t, 1, "sidecache_config_reloads_total", "result", "error")
		if ttl := hitTTL(t, c, sc, next()); ttl > 5 {
			t.Errorf("after a broken update new entries get ttl=%d, want the running 5s TTL kept", ttl)
		}
		if got := reloads("success"); got != 2 {
			t.Errorf(`config_reloads_total{result="success"} = %v after a broken update, want still 2`, got)
		}
		if m := regexp.MustCompile(`config reload failed.*routes\[0\]\.bogus`).FindString(sc.out.String()); m == "" {
			t.Errorf("the log does not name the broken field routes[0].bogus:\n%s", sc.out)
		}
		// SIGHUP re-reads the file even though the watcher has seen it.
		sc.signal(t, syscall.SIGHUP)
		sc.waitMetric(t, 2, "sidecache_config_reloads_total", "result", "error")
		if r := get(t, c, sc.admin+"/readyz"); r.code != 200 {
			t.Errorf("/readyz = %d %s with a broken file on disk, want 200 on the running config", r.code, r.body)
		}
	})

	l.stop(t)
	sc.signal(t, syscall.SIGTERM)
	if code := sc.wait(); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
}
