// Package bulk holds the pure helpers behind batched routes: building the
// bulk request URL, splitting the bulk JSON answer into one body per id, and
// joining per-id bodies back into an array for split routes.
//
// Splitting is strict on purpose: an answer that is not an array of objects
// each carrying its id (or null, no element: Split) is rejected as a whole,
// so the proxy answers 502 to every waiter rather than caching a wrong
// body under some id.
package bulk

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"unsafe"
)

// ErrMalformed is wrapped by every Split error.
var ErrMalformed = errors.New("bulk: malformed answer")

// ErrShape, which wraps ErrMalformed, is the Split error of an answer that
// is valid JSON but not an array of objects each carrying its id: unlike
// broken JSON, such an answer may be caused by one of the ids asked for
// (an upstream that answers 200 {"error":"bad id x7"}), so a caller may
// isolate it by asking for fewer ids.
var ErrShape = fmt.Errorf("%w: not an array of objects carrying their id", ErrMalformed)

// Isolable reports whether a failed bulk call's status may come from one
// of its ids rather than from the upstream being unwell: a 4xx other than
// 408 and 429 (RFC 9110 §15.5: the client's request is at fault, and with
// a bulk call the request is its id list; a 408 or 429 asks for fewer
// calls, not more). A caller may then ask again for each half of the ids.
func Isolable(code int) bool {
	return code >= 400 && code <= 499 && code != 408 && code != 429
}

// ErrIDList is wrapped by every ParseIDs error: the client's list is at
// fault, not the upstream.
var ErrIDList = errors.New("bulk: bad id list")

// The ways an id list is bad (see ParseIDs); each wraps ErrIDList.
var (
	ErrNoIDs      = fmt.Errorf("%w: no ids", ErrIDList)
	ErrEmptyID    = fmt.Errorf("%w: empty id", ErrIDList)
	ErrTooManyIDs = fmt.Errorf("%w: too many ids", ErrIDList)
)

// Split parses a bulk answer, a JSON array of objects, into its elements
// keyed by the value of idField.
//
// A null in the array is no element (a DataLoader batch function answers
// an unknown id with null in its place): it names no id, so the ids it
// stands for are those the answer leaves out, absent as any omitted id
// is. A null answer, an element that is a string, number, boolean or
// array, or an object without a string or number id is malformed.
//
// Each element is returned compacted (json.Compact: insignificant whitespace
// removed, nothing else changed, string escapes kept as sent) in its own
// copy, so a cached element neither carries the upstream's indentation nor
// pins the whole answer in memory.
//
// idField names a top-level field and is matched as encoding/json matches
// map keys: exactly, after unescaping ("\u0069d" matches "id"), the last one
// counting if an object repeats it. Its value must be a JSON string or
// number: a string gives its unescaped text, a number its literal text
// exactly as sent, not normalised, so 7 and "7" both give "7" while 1e3
// gives "1e3" and -0 gives "-0" (a request for id 1000 or 0 then finds
// nothing, and the proxy answers 404 rather than guess). true, false, null,
// objects and arrays are malformed ids.
//
// When two elements share an id, the first wins, so re-reading an answer
// never changes which body is cached. An empty array is a valid answer with
// no elements.
func Split(body []byte, idField string) (map[string][]byte, error) {
	var out map[string][]byte
	err := elements(body, idField, 0, func(n int) { out = make(map[string][]byte, n) },
		func(id []byte, decoded string, plain bool, e []byte) {
			k := decoded
			if plain {
				k = string(id)
			}
			if _, dup := out[k]; !dup {
				out[k] = bytes.Clone(e) // its own copy: a cached element does not pin the answer
			}
		})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// SplitFor is Split for the elements of ids only, the ids a bulk call asked
// for, distinct (a batch's are): out[i] is the element of ids[i], nil
// when the answer has none (a repeated id gets it at its first place). It
// accepts and refuses exactly the answers Split does, with the same
// errors, and gives each element Split gives for its id (the first of
// several with one id). It copies only those elements and builds no id
// string for an id the answer spells as the caller does: a batch's
// elements cost one allocation each, not two and a map entry.
func SplitFor(body []byte, idField string, ids []string) ([][]byte, error) {
	return SplitForRoom(body, idField, ids, 0)
}

// SplitForRoom is SplitFor with room bytes of capacity past the end of
// each element's copy, the caller's to fill (ETagAfter): what lives as
// long as the element then shares its allocation.
//
// An answer most often lists its elements in the order the ids were asked
// (a loop over the ids), or in an order of its own (a SQL IN … ORDER BY
// id, while a batch lists its ids in the order its requests came), so
// each element's id is first compared with the id after the last one
// found, then looked for among the others by the last 8 bytes of each
// (tail8, read once per id into an array on the stack at the first
// element out of order): a scan of a few
// dozen words, where a map of ids to their places cost an allocation and
// a hash of every id per call, and comparing the strings themselves cost
// a call per id. Only a batch of more than maxScan ids builds the map, at
// the first element out of order. With distinct ids the id found so is
// the one the map would find.
func SplitForRoom(body []byte, idField string, ids []string, room int) ([][]byte, error) {
	out, _, err := SplitForRoomStrays(body, idField, ids, room)
	return out, err
}

// SplitForRoomStrays is SplitForRoom that also counts the answer's
// strays: its elements whose id is none of ids. An upstream that echoes
// an id in a spelling of its own (5 for the slug 5-acme, as Rails' find
// reads it; ab12… for the UUID AB12…, as PostgreSQL prints it) answers
// the id asked with a stray, and the id asked has no element: it is not
// known to be absent, so the caller must not take it for one.
func SplitForRoomStrays(body []byte, idField string, ids []string, room int) (out [][]byte, strays int, err error) {
	var index map[string]int  // built at the first element out of order, past maxScan ids
	var tails [maxScan]uint64 // read at the first element out of order
	tailed := false
	next := 0 // the place after the last id found
	out = make([][]byte, len(ids))
	err = elements(body, idField, len(ids), func(int) {}, func(id []byte, decoded string, plain bool, e []byte) {
		// The id as the ids spell it: id's own bytes, no copy (it is
		// only compared and looked up, never kept).
		k := decoded
		if plain {
			k = unsafe.String(unsafe.SliceData(id), len(id))
		}
		i, ok := next, next < len(ids) && ids[next] == k
		switch {
		case ok:
		case len(ids) <= maxScan:
			if !tailed {
				for i, id := range ids {
					tails[i] = tail8(id)
				}
				tailed = true
			}
			t := tail8(k)
			for j := range ids {
				if tails[j] == t && ids[j] == k {
					i, ok = j, true
					break
				}
			}
		default:
			if index == nil {
				index = make(map[string]int, len(ids))
				for i, id := range ids {
					if _, dup := index[id]; !dup {
						index[id] = i
					}
				}
			}
			i, ok = index[k]
		}
		if !ok {
			strays++
			return
		}
		next = i + 1
		if out[i] == nil {
			// Not nil: an element is at least {}.
			out[i] = append(make([]byte, 0, len(e)+room), e...)
		}
	})
	if err != nil {
		return nil, 0, err
	}
	return out, strays, nil
}

// tail8 is the last 8 bytes of s (all of a shorter s) as a word, with s's
// length: what tells apart the ids of one batch (ids of one length most
// often differ in their last digits). Equal ids have equal tails; unequal
// ones may too, so a match is then compared whole.
func tail8(s string) uint64 {
	w := uint64(len(s))
	for i := max(len(s)-8, 0); i < len(s); i++ {
		w = w<<8 ^ uint64(s[i])
	}
	return w
}

// maxScan is the most ids SplitForRoom finds an element's place among by
// comparing its id with theirs: past it, by a map.
const maxScan = 64

// elements is Split's scan: it validates body, calls start with how
// many elements it holds at most (null ones counted), then each with
// every element (compact) and its id — id, the id's own bytes in e, when
// plain, else decoded. A null in the array is no element: each is not
// called for it. It stops at the first malformed element. hint is about
// how many elements to expect.
func elements(body []byte, idField string, hint int, start func(n int), each func(id []byte, decoded string, plain bool, e []byte)) error {
	// The body is validated once (validator, which also finds
	// whitespace between tokens), and compacted only if it has some
	// (most encoders send none). The validating pass records where each
	// element and its id field are (validator.record), so the elements
	// are then sliced out of it with no second walk of their fields: no
	// decode of the answer into values, and one copy of each element's
	// raw bytes.
	// A UTF-8 byte order mark before the array (a .NET or PowerShell
	// app's Encoding.UTF8 writer sends one) is no part of it: RFC 8259
	// §8.1 lets a parser ignore it, and taken for broken JSON it failed
	// every call of such an upstream. Nothing else of the body is.
	if len(body) >= len(utf8BOM) && string(body[:len(utf8BOM)]) == utf8BOM {
		body = body[len(utf8BOM):]
	}
	b := body
	v := validator{b: b, record: true, idField: idField, elems: make([]span, 0, max(hint, 1))}
	if ok, spaced := v.check(); !ok || spaced {
		var buf bytes.Buffer
		buf.Grow(len(body))
		if err := json.Compact(&buf, body); err != nil {
			return fmt.Errorf("%w: %w", ErrMalformed, err)
		}
		b = buf.Bytes()
		// Once more on the compact bytes, for the spans: rare (most
		// answers come compact), and no costlier than the walk it saves.
		v = validator{b: b, record: true, idField: idField, elems: v.elems[:0]}
		v.check()
	}
	switch {
	case string(b) == "null":
		return fmt.Errorf("%w: null", ErrShape)
	case b[0] != '[':
		return fmt.Errorf("%w: not an array", ErrShape)
	}
	start(len(v.elems))
	for n, sp := range v.elems {
		e := b[sp.start:sp.end]
		if e[0] == 'n' {
			// null (the only value starting with n): no element. A
			// DataLoader batch function or a GraphQL batch resolver
			// answers an id it does not know with null in its place
			// (ids.map(id => rows.find(…) || null)): it names no id,
			// so the id it stands for is one the answer leaves out,
			// read as every omitted id is (absent), not a malformed
			// answer that failed the call and every id in it.
			continue
		}
		if e[0] != '{' {
			return fmt.Errorf("%w: element %d: not an object", ErrShape, n)
		}
		var val []byte
		if sp.idEnd > 0 {
			val = b[sp.idStart:sp.idEnd]
		}
		id, decoded, plain, err := idOf(val, idField)
		if err != nil {
			return fmt.Errorf("%w: element %d: %w", ErrShape, n, err)
		}
		each(id, decoded, plain, e)
	}
	return nil
}

// utf8BOM is U+FEFF, the byte order mark, in UTF-8.
const utf8BOM = "\xef\xbb\xbf"

// idOf returns the id of an element whose id field holds v (nil: none):
// plain, its own bytes in v (a plain ASCII string's inside, a number's
// literal), else decoded from its escapes.
func idOf(v []byte, idField string) (id []byte, decoded string, plain bool, err error) {
	switch {
	case v == nil:
		return nil, "", false, fmt.Errorf("no %q field", idField)
	case v[0] == '"' && plainASCII(v[1:len(v)-1]):
		return v[1 : len(v)-1], "", true, nil
	case v[0] == '"':
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return nil, "", false, fmt.Errorf("field %q: %w", idField, err)
		}
		return nil, s, false, nil
	case v[0] == '-' || '0' <= v[0] && v[0] <= '9':
		return v, "", true, nil
	default:
		return nil, "", false, fmt.Errorf("field %q is %s, not a string or number", idField, v)
	}
}

// field returns the raw value of the last top-level field called name in
// obj, a compact and valid JSON object, or nil. Walking the object by hand
// instead of decoding it into a map saves a map and a copy of every field
// per element; validity was checked by the caller, so the walk need not
// check it again.
func field(obj []byte, name string) []byte {
	val, _ := fieldEnd(obj, 0, name)
	return val
}

// fieldEnd is field for the object starting at b[i], b compact and
// valid; end is the index just past the object.
func fieldEnd(b []byte, i int, name string) (val []byte, end int) {
	for i++; b[i] != '}'; {
		keyEnd := skipString(b, i)
		start := keyEnd + 1 // past ':'
		end := skipValue(b, start)
		if keyIs(b[i:keyEnd], name) {
			val = b[start:end]
		}
		i = end
		if b[i] == ',' {
			i++
		}
	}
	return val, i + 1
}

// plainASCII reports whether the inside of a JSON string is its own
// text: no escape, and no byte that decoding could replace (non-ASCII may
// be invalid UTF-8, which encoding/json turns into U+FFFD). A byte loop:
// a byte from 0x80 up starts a rune from 0x80 up or an invalid one, so
// decoding runes (bytes.IndexFunc) told no more, slower.
func plainASCII(raw []byte) bool {
	for _, c := range raw {
		if c == '\\' || c >= 0x80 {
			return false
		}
	}
	return true
}

// keyIs reports whether the quoted JSON string key decodes to name. Only
// keys with escapes or non-ASCII bytes are decoded, so that invalid UTF-8
// is replaced exactly as encoding/json would.
func keyIs(key []byte, name string) bool {
	if raw := key[1 : len(key)-1]; plainASCII(raw) {
		return string(raw) == name
	}
	var s string
	return json.Unmarshal(key, &s) == nil && s == name
}

// skipString returns the index just past the string starting at b[i].
//
// It looks for the closing quote with bytes.IndexByte, which scans many
// bytes at a time, and for an escape only before it: an element's long
// strings (a bio, a description) were most of the walks' time byte by
// byte.
func skipString(b []byte, i int) int {
	for i++; ; {
		q := i + bytes.IndexByte(b[i:], '"')
		e := bytes.IndexByte(b[i:q], '\\')
		if e < 0 {
			return q + 1
		}
		i += e + 2 // the escape and the byte it escapes, a quote maybe
	}
}

// skipValue returns the index just past the value starting at b[i].
func skipValue(b []byte, i int) int {
	depth := 0
	for ; ; i++ {
		switch b[i] {
		case '"':
			i = skipString(b, i) - 1
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i
			}
			if depth--; depth == 0 {
				return i + 1
			}
		case ',':
			if depth == 0 {
				return i
			}
		}
	}
}

// Join assembles elements, each a JSON value, into a JSON array in the given
// order. It does not validate them.
func Join(elems [][]byte) []byte {
	n := 2 + max(len(elems)-1, 0)
	for _, e := range elems {
		n += len(e)
	}
	out := make([]byte, 0, n)
	out = append(out, '[')
	for i, e := range elems {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, e...)
	}
	return append(out, ']')
}

// ParseIDs splits a comma-separated id list such as the value of ?ids=:
// "3,1, 2,3" gives ["3" "1" "2"]. Ids are trimmed of white space (an
// inner space is kept); the result holds each distinct id once, in the order
// of its first appearance, which is the order the answer is reassembled in.
//
// Errors, each wrapping ErrIDList so a caller can answer 400 with the
// message:
//   - ErrNoIDs: the list is empty or only blanks;
//   - ErrEmptyID: an element is empty or blank ("1,,2", "1,2,", ",", "1, ,2");
//   - ErrTooManyIDs: more than maxIDs distinct ids (maxIDs < 1: no bound).
//     Duplicates do not count, so "1,1,1" is one id.
func ParseIDs(v string, maxIDs int) ([]string, error) {
	if strings.TrimSpace(v) == "" {
		return nil, ErrNoIDs
	}
	var ids []string
	seen := make(map[string]struct{})
	pos := 0
	for part := range strings.SplitSeq(v, ",") {
		pos++
		id := strings.TrimSpace(part)
		if id == "" {
			return nil, fmt.Errorf("%w: element %d", ErrEmptyID, pos)
		}
		if _, dup := seen[id]; dup {
			continue
		}
		if maxIDs > 0 && len(ids) == maxIDs {
			return nil, fmt.Errorf("%w: more than %d distinct ids", ErrTooManyIDs, maxIDs)
		}
		seen[id] = struct{}{}
		ids = append(ids, id)
	}
	return ids, nil
}

// URL builds the bulk request URL: path + "?" + param + "=" + the ids joined
// by literal commas. Each id is query-escaped, so an id holding a comma
// ("a,b" -> "a%2Cb") cannot be mistaken for two. If path already has a query
// ("/users?active=1"), the parameter is appended with "&".
func URL(path, param string, ids []string) string {
	// Sized first, so the URL is built in one allocation rather than
	// grown through several as the ids go in (an escaped id may still
	// grow it once).
	n := len(path) + 2 + len(param) + len(ids)
	for _, id := range ids {
		n += len(id)
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteString(path)
	if strings.Contains(path, "?") {
		b.WriteByte('&')
	} else {
		b.WriteByte('?')
	}
	b.WriteString(url.QueryEscape(param))
	b.WriteByte('=')
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(url.QueryEscape(id))
	}
	return b.String()
}
