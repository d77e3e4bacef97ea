package cache

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// equalEntry compares what the codec promises to keep: times as instants
// (not location or monotonic reading), and nil and empty as the same.
func equalEntry(a, b *Entry) bool {
	return a.Status == b.Status &&
		a.StoredAt.Equal(b.StoredAt) && a.StoredAt.IsZero() == b.StoredAt.IsZero() &&
		a.TTL == b.TTL &&
		a.StaleWhileRevalidate == b.StaleWhileRevalidate &&
		a.StaleIfError == b.StaleIfError &&
		a.InitialAge == b.InitialAge && a.Keep == b.Keep && a.NoStale == b.NoStale &&
		slices.Equal(a.Tags, b.Tags) &&
		slices.Equal(a.Variants, b.Variants) &&
		maps.EqualFunc(a.Header, b.Header, slices.Equal) &&
		bytes.Equal(a.Body, b.Body)
}

// show prints an entry with its body abbreviated.
func show(e *Entry) string {
	c := *e
	c.Body = nil
	return fmt.Sprintf("%+v body=%dB %q…", c, len(e.Body), e.Body[:min(len(e.Body), 32)])
}

// The zero time travels as 0 ns; the Unix epoch, which no entry is ever
// stored at, shares that encoding and so decodes as the zero time.
func TestCodecZeroTime(t *testing.T) {
	for _, at := range []time.Time{{}, time.Unix(0, 0)} {
		got, err := Unmarshal(Marshal(&Entry{Status: 200, StoredAt: at, TTL: time.Hour}))
		if err != nil {
			t.Fatal(err)
		}
		if !got.StoredAt.IsZero() {
			t.Errorf("StoredAt %v decoded as %v, want the zero time", at, got.StoredAt)
		}
		if got.Fresh(time.Now()) {
			t.Errorf("entry stored at %v decoded as fresh", at)
		}
	}
}

// A version-1 entry, written before InitialAge, Keep and the flags, still
// reads (a rolling deploy keeps its L2 hits).
func TestCodecReadsVersion1(t *testing.T) {
	want := &Entry{Status: 200, StoredAt: time.Date(2025, 3, 1, 12, 30, 0, 0, time.UTC), TTL: time.Minute,
		Tags: []string{"t"}, Header: http.Header{"A": {"b"}}, Body: []byte("body")}
	b := []byte{codecMagic, 1}
	b = binary.AppendUvarint(b, uint64(want.Status))
	b = binary.AppendVarint(b, want.StoredAt.UnixNano())
	b = binary.AppendVarint(b, int64(want.TTL))
	b = binary.AppendVarint(b, 0)
	b = binary.AppendVarint(b, 0)
	b = appendStrings(b, want.Tags)
	b = appendStrings(b, nil)
	b = binary.AppendUvarint(b, 1)
	b = appendString(b, "A")
	b = appendStrings(b, []string{"b"})
	b = binary.AppendUvarint(b, uint64(len(want.Body)))
	b = append(b, want.Body...)
	got, err := Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if !equalEntry(got, want) {
		t.Errorf("got %s, want %s", show(got), show(want))
	}
}

func TestCodecRoundTrip(t *testing.T) {
	stored := time.Date(2025, 3, 1, 12, 30, 0, 123456789, time.UTC)
	many := http.Header{}
	for i := range 200 {
		many[fmt.Sprintf("X-Header-%d", i)] = []string{fmt.Sprint(i), strings.Repeat("v", i)}
	}
	tests := []struct {
		name string
		e    *Entry
	}{
		{"zero entry", &Entry{}},
		{"empty body", &Entry{Status: 204, StoredAt: stored, TTL: time.Minute, Body: []byte{}}},
		{"full", &Entry{
			Status:               200,
			Header:               http.Header{"Content-Type": {"application/json"}, "Vary": {"Accept", "Accept-Language"}},
			Body:                 []byte(`{"id":42}`),
			StoredAt:             stored,
			TTL:                  5 * time.Minute,
			StaleWhileRevalidate: 30 * time.Second,
			StaleIfError:         10 * time.Minute,
			InitialAge:           42 * time.Second,
			Keep:                 time.Hour,
			NoStale:              true,
			Tags:                 []string{"client:42", "route:client"},
		}},
		{"many headers", &Entry{Status: 200, Header: many, StoredAt: stored, TTL: time.Hour}},
		{"header with no values", &Entry{Status: 200, Header: http.Header{"X-Empty": nil, "X-Blank": {""}}}},
		{"tags with empty and unicode", &Entry{Status: 404, Tags: []string{"", "ключ:1", "a\x00b"}}},
		{"variants marker", &Entry{StoredAt: stored, TTL: time.Minute, Variants: []string{"Accept-Encoding", "Accept-Language"}}},
		{"zero times", &Entry{Status: 200, Body: []byte("x")}},
		{"negative durations", &Entry{Status: 301, StoredAt: stored, TTL: -1, StaleIfError: -time.Hour}},
		{"binary body", &Entry{Status: 200, Body: bytes.Repeat([]byte{0, 0xff, 0x5c, 1}, 1000)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := Marshal(tt.e)
			got, err := Unmarshal(data)
			if err != nil {
				t.Fatalf("Unmarshal(Marshal(e)): %v", err)
			}
			if !equalEntry(got, tt.e) {
				t.Fatalf("round trip changed the entry:\n got %s\nwant %s", show(got), show(tt.e))
			}
			if got.IsVariants() != tt.e.IsVariants() {
				t.Fatalf("IsVariants = %v, want %v", got.IsVariants(), tt.e.IsVariants())
			}
			// The decoded body must not alias the input buffer.
			if len(got.Body) > 0 {
				clear(data)
				if !bytes.Equal(got.Body, tt.e.Body) {
					t.Fatal("decoded body aliases the encoded bytes")
				}
			}
		})
	}
}

func TestUnmarshalRejects(t *testing.T) {
	good := Marshal(&Entry{Status: 200, Header: http.Header{"A": {"b"}}, Body: []byte("body"), Tags: []string{"t"}})
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"one byte", []byte{codecMagic}},
		{"bad magic", append([]byte{0x00}, good[1:]...)},
		{"unknown version", append([]byte{codecMagic, codecVersion + 1}, good[2:]...)},
		{"truncated", good[:len(good)-1]},
		{"trailing byte", append(slices.Clone(good), 0)},
		{"status over 999", Marshal(&Entry{Status: 1000})},
		{"huge count", []byte{codecMagic, codecVersion, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f}},
		{"body longer than input", []byte{codecMagic, codecVersion, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10, 'x'}},
		{"unknown flag", []byte{codecMagic, codecVersion, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if e, err := Unmarshal(tt.data); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Unmarshal = %+v, %v; want ErrCorrupt", e, err)
			}
		})
	}
	// Every strict prefix of a valid encoding is corrupt, never a panic.
	for i := range good {
		if _, err := Unmarshal(good[:i]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("prefix of %d bytes: err = %v", i, err)
		}
	}
}

func FuzzUnmarshal(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{codecMagic, codecVersion})
	f.Add(Marshal(&Entry{}))
	f.Add(Marshal(&Entry{Status: 200, Header: http.Header{"A": {"1", "2"}}, Body: []byte("hi"),
		StoredAt: time.Unix(1700000000, 5), TTL: time.Minute, Tags: []string{"t"}}))
	f.Add(Marshal(&Entry{Variants: []string{"Accept"}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := Unmarshal(data)
		owned, oerr := UnmarshalOwned(slices.Clone(data))
		if (err == nil) != (oerr == nil) {
			t.Fatalf("Unmarshal: %v; UnmarshalOwned: %v", err, oerr)
		}
		if err != nil {
			if !errors.Is(err, ErrCorrupt) || e != nil || !errors.Is(oerr, ErrCorrupt) || owned != nil {
				t.Fatalf("Unmarshal = %v, %v; UnmarshalOwned = %v, %v; want nil, ErrCorrupt", e, err, owned, oerr)
			}
			return
		}
		if !equalEntry(owned, e) {
			t.Fatalf("UnmarshalOwned differs:\n got %s\nwant %s", show(owned), show(e))
		}
		checkCapped(t, e)
		checkCapped(t, owned)
		again, err := Unmarshal(Marshal(e))
		if err != nil {
			t.Fatalf("re-encoding a decoded entry: %v", err)
		}
		if !equalEntry(again, e) {
			t.Fatalf("second round trip differs:\n got %s\nwant %s", show(again), show(e))
		}
	})
}

func FuzzRoundTrip(f *testing.F) {
	f.Add(200, int64(1700000000e9), int64(time.Minute), int64(0), int64(0), "client:42\nroute:c", "", "Content-Type", "text/plain", []byte("body"))
	f.Add(0, int64(0), int64(0), int64(0), int64(0), "", "Accept\nAccept-Language", "", "", []byte(nil))
	f.Add(999, int64(-1), int64(-5), int64(1<<62), int64(-1<<62), "\n\n", "\x00", "k\nk", "v\nv", []byte{0, 1, 2})
	f.Fuzz(func(t *testing.T, status int, storedAt, ttl, swr, sie int64, tags, variants, hkey, hval string, body []byte) {
		e := &Entry{
			Status:               ((status % 1000) + 1000) % 1000,
			Body:                 body,
			TTL:                  time.Duration(ttl),
			StaleWhileRevalidate: time.Duration(swr),
			StaleIfError:         time.Duration(sie),
			// The version-2 fields, from the same inputs.
			InitialAge: time.Duration(swr ^ sie),
			Keep:       time.Duration(ttl ^ swr),
			NoStale:    status%2 == 0,
		}
		// 0 nanoseconds is the codec's encoding of the zero time.
		if storedAt != 0 {
			e.StoredAt = time.Unix(0, storedAt)
		}
		if tags != "" {
			e.Tags = strings.Split(tags, "\n")
		}
		if variants != "" {
			e.Variants = strings.Split(variants, "\n")
		}
		if hkey != "" {
			e.Header = http.Header{}
			for i, k := range strings.Split(hkey, "\n") {
				e.Header[k] = append(e.Header[k], strings.Split(hval, "\n")[i%2:]...)
			}
		}
		got, err := Unmarshal(Marshal(e))
		if err != nil {
			t.Fatalf("Unmarshal(Marshal(%+v)): %v", e, err)
		}
		if !equalEntry(got, e) {
			t.Fatalf("round trip changed the entry:\n got %s\nwant %s", show(got), show(e))
		}
	})
}

func benchEntry() *Entry {
	return &Entry{
		Status: 200,
		Header: http.Header{
			"Content-Type":  {"application/json"},
			"Cache-Control": {"max-age=300"},
			"Etag":          {`"abc123"`},
		},
		Body:     bytes.Repeat([]byte("x"), 2<<10),
		StoredAt: time.Now(),
		TTL:      5 * time.Minute,
		Tags:     []string{"client:42", "route:client"},
	}
}

func BenchmarkMarshal(b *testing.B) {
	e := benchEntry()
	b.ReportAllocs()
	b.SetBytes(int64(len(e.Body)))
	for b.Loop() {
		Marshal(e)
	}
}

func BenchmarkUnmarshal(b *testing.B) {
	data := Marshal(benchEntry())
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Unmarshal(data); err != nil {
			b.Fatal(err)
		}
	}
}

// Decoding costs a fixed handful of allocations whatever the header holds
// (the entry, one string for every tag, name and value, one backing array
// for their lists, the header map's two, the body's copy): an L2 hit decodes one
// entry per request. It made about 16 for benchEntry before, one per string
// and list.
func TestUnmarshalAllocs(t *testing.T) {
	e := benchEntry()
	e.Header["Vary"] = []string{"Accept", "Accept-Encoding"}
	e.Header["X-Many"] = []string{"a", "b", "c", "d"}
	data := Marshal(e)
	for _, tt := range []struct {
		name   string
		decode func([]byte) (*Entry, error)
		max    float64
	}{
		{"Unmarshal", Unmarshal, 5},
		{"UnmarshalOwned", UnmarshalOwned, 4},
	} {
		n := testing.AllocsPerRun(100, func() {
			if _, err := tt.decode(data); err != nil {
				t.Fatal(err)
			}
		})
		if n > tt.max {
			t.Errorf("%s: %.0f allocations per entry, want at most %.0f", tt.name, n, tt.max)
		}
	}
}

// UnmarshalOwned keeps the body in the buffer it was handed (no copy),
// decodes what Unmarshal decodes, and no decoded list reaches into the
// next one's part of the shared backing array.
func TestUnmarshalOwned(t *testing.T) {
	e := benchEntry()
	e.Variants = []string{"Accept"}
	data := Marshal(e)
	got, err := UnmarshalOwned(data)
	if err != nil {
		t.Fatal(err)
	}
	if !equalEntry(got, e) {
		t.Fatalf("got %s, want %s", show(got), show(e))
	}
	if &got.Body[0] != &data[len(data)-len(e.Body)] {
		t.Error("the body was copied")
	}
	checkCapped(t, got)
	tags := slices.Clone(got.Tags)
	_ = append(got.Variants, "X")
	for k, vs := range got.Header {
		got.Header[k] = append(vs, "appended")
	}
	if !slices.Equal(got.Tags, tags) {
		t.Errorf("appending to other lists changed the tags: %q", got.Tags)
	}
}

// checkCapped fails if a decoded list has room past its end: an append
// would write into the list decoded after it.
func checkCapped(t *testing.T, e *Entry) {
	t.Helper()
	lists := [][]string{e.Tags, e.Variants}
	for _, vs := range e.Header {
		lists = append(lists, vs)
	}
	for _, l := range lists {
		if cap(l) != len(l) {
			t.Fatalf("list %q has cap %d > len %d", l, cap(l), len(l))
		}
	}
	if cap(e.Body) != len(e.Body) {
		t.Fatalf("body has cap %d > len %d", cap(e.Body), len(e.Body))
	}
}

func BenchmarkUnmarshalOwned(b *testing.B) {
	data := Marshal(benchEntry())
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := UnmarshalOwned(data); err != nil {
			b.Fatal(err)
		}
	}
}
