package bulk

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/crypto/blake2b"
)

// TestETagForm: an element's tag is 96 bits of the BLAKE2b-256 of its
// bytes, quoted base64 (RFC 9110 §8.8.3), ETagLen long. The function is
// pinned because every replica of a fleet and every restart must compute
// the same tag for the same bytes, or a client's If-None-Match stops
// matching; the expected value is computed here from the reference
// function, not copied. ETagAfter gives the same tag, in the room past
// the element (then capped at its length) or without it, and leaves the
// element's bytes alone.
func TestETagForm(t *testing.T) {
	for _, body := range []string{"", "{}", `{"id":1}`, strings.Repeat(`{"id":7,"bio":"x"}`, 60)} {
		sum := blake2b.Sum256([]byte(body))
		want := `"` + base64.RawURLEncoding.EncodeToString(sum[:12]) + `"`
		if got := ETag([]byte(body)); got != want || len(got) != ETagLen {
			t.Errorf("ETag(%.20q) = %s, want %s (%d bytes)", body, got, want, ETagLen)
		}
		for _, room := range []int{0, ETagLen - 1, ETagLen, ETagLen + 5} {
			elem := append(make([]byte, 0, len(body)+room), body...)
			tag, b := ETagAfter(elem)
			if tag != want || string(b) != body || room >= ETagLen && cap(b) != len(body) {
				t.Errorf("ETagAfter(%.20q) with room %d = %s %.20q cap %d, want %s", body, room, tag, b, cap(b), want)
			}
		}
	}
}

// TestETagEachByte: a strong validator changes whenever a byte of the
// representation does (RFC 9110 §8.8.1), whichever byte it is.
func TestETagEachByte(t *testing.T) {
	body := []byte(strings.Repeat(`{"id":12345,"name":"n"}`, 10))
	seen := map[string]int{ETag(body): -1}
	for i := range body {
		c := body[i]
		body[i] ^= 1
		tag := ETag(body)
		if j, ok := seen[tag]; ok {
			t.Fatalf("byte %d changed and the tag is the one of %d: %s", i, j, tag)
		}
		seen[tag] = i
		body[i] = c
	}
}

// BenchmarkETag is the tag of one element of about 1 KB, the size of the
// demo upstream's users: what each 200 element of a bulk answer costs when
// the app gives no batch.etag_field.
func BenchmarkETag(b *testing.B) {
	var sb strings.Builder
	for i := 0; sb.Len() < 1000; i++ {
		fmt.Fprintf(&sb, `"f%d":"value %d",`, i, i*7919)
	}
	body := []byte("{" + sb.String()[:998] + "}")
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		ETag(body)
	}
}
