package demo

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fast keeps tests quick: no query time unless a test asks for it.
var fast = Options{QueryTime: -1, PerRowTime: -1, Clients: 100, Users: 50}

func start(t *testing.T, opts Options) (*Server, *httptest.Server) {
	t.Helper()
	s := New(opts)
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

func do(t *testing.T, ts *httptest.Server, method, path string, body string, hdr ...string) reply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, ts.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{resp.StatusCode, resp.Header, b}
}

func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
	return v
}

func ids(t *testing.T, b []byte) []int {
	t.Helper()
	var out []int
	for _, r := range decode[[]record](t, b) {
		out = append(out, r.ID)
	}
	return out
}

func TestGetOne(t *testing.T) {
	_, ts := start(t, fast)
	tests := []struct {
		path   string
		status int
	}{
		{"/clients/1", 200},
		{"/clients/100", 200},
		{"/users/50", 200},
		{"/clients/0", 404},
		{"/clients/101", 404},
		{"/users/51", 404},
		{"/users/-3", 404},
		{"/users/abc", 400},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			r := do(t, ts, "GET", tc.path, "")
			if r.status != tc.status {
				t.Fatalf("status %d, want %d (%s)", r.status, tc.status, r.body)
			}
			if ct := r.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			if tc.status != 200 {
				if e := decode[errorBody](t, r.body); e.Error == "" {
					t.Errorf("error body %q has no error", r.body)
				}
				return
			}
			rec := decode[record](t, r.body)
			if want := tc.path[strings.LastIndex(tc.path, "/")+1:]; want != itoa(rec.ID) {
				t.Errorf("id %d, want %s", rec.ID, want)
			}
			if rec.Version != 1 || rec.Name == "" || !strings.Contains(rec.Email, "@") {
				t.Errorf("record %+v", rec)
			}
			if n := len(r.body); n < 500 || n > 1024 {
				t.Errorf("body is %d bytes, want 500..1024", n)
			}
			if r.header.Get("ETag") == "" || r.header.Get("Last-Modified") == "" {
				t.Errorf("validators missing: %v", r.header)
			}
		})
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func TestDeterministic(t *testing.T) {
	_, a := start(t, fast)
	_, b := start(t, fast)
	for _, path := range []string{"/clients/7", "/users/7"} {
		ra, rb := do(t, a, "GET", path, ""), do(t, b, "GET", path, "")
		if string(ra.body) != string(rb.body) || ra.header.Get("ETag") != rb.header.Get("ETag") {
			t.Errorf("%s differs between two servers", path)
		}
	}
	c, u := do(t, a, "GET", "/clients/7", ""), do(t, a, "GET", "/users/7", "")
	if string(c.body) == string(u.body) || c.header.Get("ETag") == u.header.Get("ETag") {
		t.Error("client 7 and user 7 are identical")
	}
	body, etag, ok := Record("clients", 7, 100)
	if !ok || string(body) != string(c.body) || etag != c.header.Get("ETag") {
		t.Errorf("Record(clients, 7) = %q %s %v, served %q %s", body, etag, ok, c.body, c.header.Get("ETag"))
	}
	if _, _, ok := Record("clients", 101, 100); ok {
		t.Error("Record out of range reported ok")
	}
}

func TestConditionalGET(t *testing.T) {
	_, ts := start(t, fast)
	first := do(t, ts, "GET", "/clients/3", "")
	etag, lm := first.header.Get("ETag"), first.header.Get("Last-Modified")
	tests := []struct {
		name   string
		hdr    []string
		status int
	}{
		{"matching etag", []string{"If-None-Match", etag}, 304},
		{"weak form", []string{"If-None-Match", "W/" + etag}, 304},
		{"in a list", []string{"If-None-Match", `"nope", ` + etag}, 304},
		{"star", []string{"If-None-Match", "*"}, 304},
		{"other etag", []string{"If-None-Match", `"nope"`}, 200},
		{"if-modified-since equal", []string{"If-Modified-Since", lm}, 304},
		{"if-modified-since older", []string{"If-Modified-Since", "Mon, 01 Jan 2024 00:00:00 GMT"}, 200},
		{"etag wins over date", []string{"If-None-Match", `"nope"`, "If-Modified-Since", lm}, 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := do(t, ts, "GET", "/clients/3", "", tc.hdr...)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d", r.status, tc.status)
			}
			if tc.status == 304 && (len(r.body) != 0 || r.header.Get("ETag") != etag) {
				t.Errorf("304 with body %q, etag %q", r.body, r.header.Get("ETag"))
			}
		})
	}
	do(t, ts, "PATCH", "/clients/3", `{"name":"New Name"}`)
	if r := do(t, ts, "GET", "/clients/3", "", "If-None-Match", etag); r.status != 200 {
		t.Errorf("old etag after PATCH: status %d, want 200", r.status)
	}
}

func TestBulk(t *testing.T) {
	_, ts := start(t, fast)
	do(t, ts, "DELETE", "/users/4", "")
	tests := []struct {
		query  string
		status int
		want   []int
	}{
		{"?ids=5,3,1", 200, []int{1, 3, 5}},
		{"?ids=3,3,1,3", 200, []int{1, 3}},
		{"?ids=2,999,0,4", 200, []int{2}}, // unknown and deleted left out
		{"?ids=1&ids=7,6", 200, []int{1, 6, 7}},
		{"?ids=", 200, nil},
		{"?ids=1,x", 400, nil},
		{"", 200, []int{1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21}},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			r := do(t, ts, "GET", "/users"+tc.query, "")
			if r.status != tc.status {
				t.Fatalf("status %d, want %d (%s)", r.status, tc.status, r.body)
			}
			if tc.status != 200 {
				return
			}
			if got := ids(t, r.body); !equal(got, tc.want) {
				t.Errorf("ids %v, want %v", got, tc.want)
			}
		})
	}
	// A bulk element is byte-identical to the single-row body.
	one := do(t, ts, "GET", "/users/5", "")
	var arr []json.RawMessage
	if err := json.Unmarshal(do(t, ts, "GET", "/users?ids=5", "").body, &arr); err != nil || len(arr) != 1 || string(arr[0]) != string(one.body) {
		t.Errorf("bulk element %q, single %q (%v)", arr, one.body, err)
	}
	if got := ids(t, do(t, ts, "GET", "/clients", "").body); len(got) != listSize || got[0] != 1 || got[19] != 20 {
		t.Errorf("GET /clients ids %v", got)
	}
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestWrites(t *testing.T) {
	_, ts := start(t, fast)
	before := do(t, ts, "GET", "/clients/9", "")

	r := do(t, ts, "PATCH", "/clients/9", `{"name":"Renamed"}`)
	rec := decode[record](t, r.body)
	if r.status != 200 || rec.Name != "Renamed" || rec.Version != 2 {
		t.Fatalf("PATCH: %d %+v", r.status, rec)
	}
	if r.header.Get("ETag") == before.header.Get("ETag") {
		t.Error("ETag unchanged by PATCH")
	}
	lm1, _ := http.ParseTime(before.header.Get("Last-Modified"))
	lm2, _ := http.ParseTime(r.header.Get("Last-Modified"))
	if !lm2.After(lm1) {
		t.Errorf("Last-Modified %v not after %v", lm2, lm1)
	}
	if got := decode[record](t, do(t, ts, "GET", "/clients/9", "").body); got != rec {
		t.Errorf("GET after PATCH %+v, want %+v", got, rec)
	}
	if r := do(t, ts, "PATCH", "/clients/9", ""); r.status != 200 || decode[record](t, r.body).Version != 3 || decode[record](t, r.body).Name != "Renamed" {
		t.Errorf("PATCH without body: %d %s", r.status, r.body)
	}
	if r := do(t, ts, "PATCH", "/clients/9", "{"); r.status != 400 {
		t.Errorf("PATCH bad JSON: %d", r.status)
	}

	steps := []struct {
		method, path string
		status       int
	}{
		{"DELETE", "/clients/9", 204},
		{"GET", "/clients/9", 404},
		{"DELETE", "/clients/9", 404},
		{"PATCH", "/clients/9", 404},
		{"DELETE", "/clients/1000", 404},
		{"GET", "/clients/10", 200},
	}
	for _, st := range steps {
		if r := do(t, ts, st.method, st.path, ""); r.status != st.status {
			t.Errorf("%s %s: %d, want %d", st.method, st.path, r.status, st.status)
		}
	}
}

func TestCountsAndReset(t *testing.T) {
	s, ts := start(t, fast)
	do(t, ts, "GET", "/clients/1", "")
	do(t, ts, "GET", "/clients/2", "", "If-None-Match", "*")
	do(t, ts, "GET", "/clients/0", "")
	do(t, ts, "GET", "/users?ids=1,2", "")
	do(t, ts, "DELETE", "/users/1", "")
	do(t, ts, "GET", "/self", "")
	do(t, ts, "GET", "/self", "", "X-Demo-Fail", "500")

	want := map[string]int64{
		"GET /clients/{id}": 3, "GET /users": 1, "DELETE /users/{id}": 1, "GET /self": 2,
		"GET /users/{id}": 0, "PATCH /clients/{id}": 0,
	}
	served := decode[map[string]int64](t, do(t, ts, "GET", "/_demo/counts", "").body)
	for name, c := range []map[string]int64{s.Counts(), served} {
		for k, v := range want {
			if c[k] != v {
				t.Errorf("counts #%d [%q] = %d, want %d (%v)", name, k, c[k], v, c)
			}
		}
		if _, ok := c["GET /_demo/counts"]; ok {
			t.Error("the counts endpoint counts itself")
		}
	}

	if r := do(t, ts, "POST", "/_demo/reset", ""); r.status != 204 {
		t.Fatalf("reset: %d", r.status)
	}
	for k, v := range s.Counts() {
		if v != 0 {
			t.Errorf("after reset %q = %d", k, v)
		}
	}
	if r := do(t, ts, "GET", "/users/1", ""); r.status != 200 || decode[record](t, r.body).Version != 1 {
		t.Errorf("deleted row not restored by reset: %d %s", r.status, r.body)
	}
}

func TestDemoHeaders(t *testing.T) {
	_, ts := start(t, fast)
	tests := []struct {
		name    string
		hdr     []string
		status  int
		atLeast time.Duration
	}{
		{"fail 503", []string{"X-Demo-Fail", "503"}, 503, 0},
		{"fail 500 with delay", []string{"X-Demo-Fail", "500", "X-Demo-Delay", "30ms"}, 500, 30 * time.Millisecond},
		{"delay", []string{"X-Demo-Delay", "60ms"}, 200, 60 * time.Millisecond},
		{"bad fail", []string{"X-Demo-Fail", "abc"}, 400, 0},
		{"fail out of range", []string{"X-Demo-Fail", "99"}, 400, 0},
		{"bad delay", []string{"X-Demo-Delay", "soon"}, 400, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			begin := time.Now()
			r := do(t, ts, "GET", "/clients/1", "", tc.hdr...)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d (%s)", r.status, tc.status, r.body)
			}
			if el := time.Since(begin); el < tc.atLeast {
				t.Errorf("took %v, want at least %v", el, tc.atLeast)
			}
			if tc.status >= 500 && decode[errorBody](t, r.body).Status != tc.status {
				t.Errorf("failure body %s", r.body)
			}
		})
	}
}

// Lower bounds only: a loaded machine can be slower, never faster.
func TestSaturation(t *testing.T) {
	t.Run("slots", func(t *testing.T) {
		_, ts := start(t, Options{Slots: 2, QueryTime: 20 * time.Millisecond})
		begin := time.Now()
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() {
				if r := do(t, ts, "GET", "/self", ""); r.status != 200 {
					t.Errorf("status %d", r.status)
				}
			})
		}
		wg.Wait()
		// 10 queries of 20ms through 2 slots: 5 rounds.
		if el := time.Since(begin); el < 100*time.Millisecond {
			t.Errorf("10 requests on 2 slots took %v, want >= 100ms", el)
		}
	})
	t.Run("per row", func(t *testing.T) {
		_, ts := start(t, Options{QueryTime: time.Millisecond, PerRowTime: 2 * time.Millisecond})
		begin := time.Now()
		do(t, ts, "GET", "/users?ids=1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20", "")
		if el := time.Since(begin); el < 41*time.Millisecond {
			t.Errorf("bulk of 20 took %v, want >= 41ms", el)
		}
	})
}

// The counters and reset endpoints stay usable while every slot is taken,
// and a client that gives up frees its slot.
func TestSlotHeldAndReleased(t *testing.T) {
	s, ts := start(t, Options{Slots: 1, QueryTime: -1})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+"/self", nil)
		req.Header.Set("X-Demo-Delay", "1h")
		if resp, err := ts.Client().Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	for len(s.slots) == 0 {
		time.Sleep(time.Millisecond)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	for _, c := range []struct{ method, path string }{{"GET", "/_demo/counts"}, {"POST", "/_demo/reset"}} {
		req, _ := http.NewRequest(c.method, ts.URL+c.path, nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s with every slot busy: %v", c.method, c.path, err)
		}
		resp.Body.Close()
	}
	cancel()
	<-done
	if r := do(t, ts, "GET", "/self", ""); r.status != 200 {
		t.Fatalf("after the slow client left: %d", r.status)
	}
}

func TestOptionsDefaults(t *testing.T) {
	got := Options{}.withDefaults()
	want := Options{Slots: 10, QueryTime: 5 * time.Millisecond, PerRowTime: 50 * time.Microsecond, Clients: 10000, Users: 10000}
	if got != want {
		t.Errorf("defaults %+v, want %+v", got, want)
	}
	if got := (Options{QueryTime: -1, PerRowTime: -1}).withDefaults(); got.QueryTime != 0 || got.PerRowTime != 0 {
		t.Errorf("negative times: %+v", got)
	}
}
