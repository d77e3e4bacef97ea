package cache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// The codec is how entries travel to L2 and back. It is versioned so that a
// rolling deploy with a new layout reads old entries as misses rather than
// as garbage: Unmarshal rejects any version it does not know.
const (
	codecMagic   = 0x5C // first byte of every encoded entry
	codecVersion = 2    // 2 added InitialAge, Keep and the flags; 1 is still read

	// maxCount bounds every count read from the wire so that a corrupt
	// length cannot make Unmarshal allocate without limit.
	maxCount = 1 << 16
)

// flagNoStale marks Entry.NoStale in the flags word.
const flagNoStale = 1 << 0

// ErrCorrupt is returned (wrapped) for any input Unmarshal cannot read.
var ErrCorrupt = errors.New("cache: corrupt entry")

// Marshal encodes e. The layout is: magic, version, then uvarints and
// length-prefixed byte strings in field order; the body comes last so a
// reader can stop early one day without a format change.
func Marshal(e *Entry) []byte {
	b := make([]byte, 0, 64+e.Size())
	b = append(b, codecMagic, codecVersion)
	b = binary.AppendUvarint(b, uint64(e.Status))
	b = binary.AppendVarint(b, unixNano(e.StoredAt))
	b = binary.AppendVarint(b, int64(e.TTL))
	b = binary.AppendVarint(b, int64(e.StaleWhileRevalidate))
	b = binary.AppendVarint(b, int64(e.StaleIfError))
	b = binary.AppendVarint(b, int64(e.InitialAge))
	b = binary.AppendVarint(b, int64(e.Keep))
	var flags uint64
	if e.NoStale {
		flags |= flagNoStale
	}
	b = binary.AppendUvarint(b, flags)
	b = appendStrings(b, e.Tags)
	b = appendStrings(b, e.Variants)
	// An ETag held outside the header (SetETag) is written as the header
	// field it stands for: the stored layout is one, whichever form the
	// entry had, and a reader of any version decodes it into the header.
	n := len(e.Header)
	if e.etag != nil {
		n++
		b = binary.AppendUvarint(b, uint64(n))
		b = appendString(b, "Etag")
		b = appendStrings(b, e.etag)
	} else {
		b = binary.AppendUvarint(b, uint64(n))
	}
	for k, vs := range e.Header {
		b = appendString(b, k)
		b = appendStrings(b, vs)
	}
	b = binary.AppendUvarint(b, uint64(len(e.Body)))
	return append(b, e.Body...)
}

// unixNano encodes the zero time as 0, which decodes back to the zero time:
// time.Time{}.UnixNano() overflows int64 and would come back as 1754.
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendStrings(b []byte, ss []string) []byte {
	b = binary.AppendUvarint(b, uint64(len(ss)))
	for _, s := range ss {
		b = appendString(b, s)
	}
	return b
}

// Unmarshal decodes what Marshal wrote. It never panics: any malformed,
// truncated or over-long input, and any trailing byte, is ErrCorrupt. The
// entry shares nothing with data.
func Unmarshal(data []byte) (*Entry, error) { return unmarshal(data, false) }

// UnmarshalOwned is Unmarshal for a caller that hands data over: the
// entry's Body is a slice of data instead of a copy, so data must be a
// buffer allocated for this entry alone (an L2 reply read into its own
// allocation), never one that is reused or written afterwards. It saves
// the body's copy on every L2 hit.
func UnmarshalOwned(data []byte) (*Entry, error) { return unmarshal(data, true) }

// unmarshal decodes in two passes so that an entry costs a fixed handful
// of allocations whatever its header holds: the first validates and counts
// the strings, the second cuts every tag, variant, header name and value
// from one string converted from the bytes that hold them, and every
// []string from one backing array (each capped at its own length, so an
// append to one never writes into the next).
func unmarshal(data []byte, own bool) (*Entry, error) {
	if len(data) < 2 || data[0] != codecMagic {
		return nil, fmt.Errorf("%w: bad magic", ErrCorrupt)
	}
	version := data[1]
	if version != codecVersion && version != 1 {
		return nil, fmt.Errorf("%w: unknown version %d", ErrCorrupt, data[1])
	}
	r := reader{b: data[2:]}
	var h Entry // the fixed fields, until the strings are counted
	status := r.uvarint()
	if status > 999 {
		r.fail("status")
	}
	h.Status = int(status)
	if ns := r.varint(); ns != 0 {
		h.StoredAt = time.Unix(0, ns)
	}
	h.TTL = time.Duration(r.varint())
	h.StaleWhileRevalidate = time.Duration(r.varint())
	h.StaleIfError = time.Duration(r.varint())
	if version >= 2 {
		h.InitialAge = time.Duration(r.varint())
		h.Keep = time.Duration(r.varint())
		flags := r.uvarint()
		if flags&^flagNoStale != 0 {
			r.fail("flags")
		}
		h.NoStale = flags&flagNoStale != 0
	}
	// First pass: validate the strings and count them.
	strs := r.b
	nss := r.skipStrings() + r.skipStrings()
	nh := r.count()
	for i := 0; i < nh && r.err == nil; i++ {
		r.skipString()
		nss += r.skipStrings()
	}
	strs = strs[:len(strs)-len(r.b)]
	body := r.take(r.count64())
	if r.err != nil {
		return nil, r.err
	}
	if len(r.b) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", ErrCorrupt, len(r.b))
	}
	// Second pass, over input the first found well formed.
	e, backing := newEntry(nss)
	*e = h
	s := strDecoder{b: strs, s: string(strs), backing: backing}
	e.Tags = s.strings()
	e.Variants = s.strings()
	if n := s.count(); n > 0 {
		e.Header = make(http.Header, n)
		for range n {
			k := s.string()
			e.Header[k] = s.strings()
		}
	}
	if len(body) > 0 {
		if own {
			e.Body = body[:len(body):len(body)]
			e.lent = true
		} else {
			e.Body = make([]byte, len(body))
			copy(e.Body, body)
		}
	}
	return e, nil
}

// newEntry allocates an entry and the backing array for its n strings'
// lists together, in one allocation when n is small (almost every entry:
// a few tags, a handful of header fields): an L2 hit decodes one entry per
// request, and each allocation there is the sidecar's own cost of the hit.
// The array is only ever read through capped slices (strDecoder.strings),
// and it lives as long as the entry's lists, which keep it anyway.
func newEntry(n int) (*Entry, []string) {
	switch {
	case n <= 4:
		b := new(struct {
			e Entry
			s [4]string
		})
		return &b.e, b.s[:n:n]
	case n <= 8:
		b := new(struct {
			e Entry
			s [8]string
		})
		return &b.e, b.s[:n:n]
	case n <= 16:
		b := new(struct {
			e Entry
			s [16]string
		})
		return &b.e, b.s[:n:n]
	}
	return new(Entry), make([]string, n)
}

// strDecoder cuts the strings of a region reader validated: b is the
// region still to read, s the whole region as one string, and off how far
// into it b starts.
type strDecoder struct {
	b       []byte
	s       string
	off     int
	backing []string
}

func (d *strDecoder) count() int {
	v, n := binary.Uvarint(d.b)
	d.b = d.b[n:]
	d.off += n
	return int(v)
}

func (d *strDecoder) string() string {
	n := d.count()
	s := d.s[d.off : d.off+n]
	d.b = d.b[n:]
	d.off += n
	return s
}

func (d *strDecoder) strings() []string {
	n := d.count()
	if n == 0 {
		return nil
	}
	ss := d.backing[:n:n]
	d.backing = d.backing[n:]
	for i := range ss {
		ss[i] = d.string()
	}
	return ss
}

// reader is a sticky-error cursor: after the first failure every read
// returns zero values, so Unmarshal checks the error once at the end.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", ErrCorrupt, what)
	}
	r.b = nil
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("uvarint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail("varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) count() int {
	n := r.uvarint()
	if n > maxCount || n > uint64(len(r.b)) {
		r.fail("count")
		return 0
	}
	return int(n)
}

// count64 reads a byte length, bounded only by what is left of the input.
func (r *reader) count64() int {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail("length")
		return 0
	}
	return int(n)
}

// take returns the next n bytes, not copied.
func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) skipString() { r.take(r.count64()) }

// skipStrings skips a list of strings and returns its length.
func (r *reader) skipStrings() int {
	n := r.count()
	for i := 0; i < n && r.err == nil; i++ {
		r.skipString()
	}
	return n
}
