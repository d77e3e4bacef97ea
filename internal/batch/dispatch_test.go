package batch

import (
	"bytes"
	"context"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// goid is the id of the calling goroutine, from its stack's header line
// ("goroutine 42 [running]:").
func goid() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	f := bytes.Fields(buf)
	if len(f) < 2 {
		return ""
	}
	return string(f[1])
}

// TestNextBatchRunsOnReturningCallsGoroutine: the batch a returning call
// lets go is fetched on that call's goroutine, after the call's waiters
// are told, not on a goroutine of its own: a busy group's calls cost no
// goroutine each (and no stack grown anew to the fetch's depth).
func TestNextBatchRunsOnReturningCallsGoroutine(t *testing.T) {
	var mu sync.Mutex
	var events, gids []string
	note := func(e string) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}
	release := make(chan struct{})
	fetch := func(_ context.Context, _ string, ids []string) (map[string]string, error) {
		mu.Lock()
		gids = append(gids, goid())
		events = append(events, "fetch "+ids[0])
		mu.Unlock()
		<-release
		m := make(map[string]string, len(ids))
		for _, id := range ids {
			m[id] = "v:" + id
		}
		return m, nil
	}
	l := New(Options{MaxSize: 1, MaxWait: never, MaxInFlight: 1}, fetch)
	defer func() {
		close(release) // before Close, which waits for a held call
		l.Close()
	}()
	ctx := context.Background()
	out := make(chan told, 3)
	const n = 3
	for i := range n {
		id := strconv.Itoa(i)
		l.LoadThen(ctx, nil, "g", "", id, func(v string, found bool, err error) {
			note("told " + id)
			out <- told{v, found, err}
		})
	}
	for range n {
		select {
		case release <- struct{}{}:
		case <-time.After(waitTimeout):
			t.Fatal("timed out waiting for a call")
		}
		if o := recv(t, out); o.err != nil || !o.found {
			t.Fatalf("got %+v", o)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"fetch 0", "told 0", "fetch 1", "told 1", "fetch 2", "told 2"}
	if !slices.Equal(events, want) {
		t.Errorf("events %v, want %v", events, want)
	}
	for i := 1; i < len(gids); i++ {
		if gids[i] != gids[0] {
			t.Errorf("calls ran on goroutines %v, want one", gids)
			break
		}
	}
}

// TestEnlistGoesTogetherWithTinyWindow: a list's ids Enlist puts in a
// batch under one hold of the lock go in one call even when MaxWait is up
// before the second of them joins: a window ends on its timer, which
// needs the lock.
func TestEnlistGoesTogetherWithTinyWindow(t *testing.T) {
	const n = 20
	rec := &recorder{}
	l := New(Options{MaxSize: 100, MaxWait: time.Nanosecond}, rec.fetch)
	defer l.Close()
	req := l.Requester(n)
	ids := make([]string, n)
	for k := range ids {
		ids[k] = strconv.Itoa(k)
	}
	l.Enlist(context.Background(), req, "g", "", ids)
	out := make(chan outcome, n)
	for _, id := range ids {
		l.LoadThen(context.Background(), req, "g", "", id, func(v string, found bool, err error) {
			out <- outcome{id, v, found, err}
		})
	}
	for range n {
		if o := recv(t, out); o.err != nil || !o.found {
			t.Fatalf("got %+v", o)
		}
	}
	if calls, _ := rec.snapshot(); len(calls) != 1 || len(calls[0]) != n {
		t.Errorf("calls %v, want one of the list's %d ids", calls, n)
	}
}
