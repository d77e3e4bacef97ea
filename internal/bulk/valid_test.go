package bulk

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math/bits"
	"strings"
	"testing"
)

// validSeeds are the edges of the grammar where a hand-written scanner
// could part from encoding/json's: every escape, number form, literal,
// nesting bound and trailing byte.
var validSeeds = []string{
	``, ` `, `[]`, `{}`, ` [ ] `, `[1,]`, `[,1]`, `{"a":1,}`, `{"a" 1}`, `{1:2}`, `{"a":}`,
	`"\u00e9\"\\\/\b\f\n\r\t"`, `"\u00g9"`, `"\u12"`, `"\x"`, "\"a\x01\"", "\"a\x7f\xff\"", `"abc`, `"\`,
	`0`, `-0`, `-`, `01`, `1.`, `1.5`, `.5`, `1e`, `1e+`, `1E-7`, `1e5.1`, `-1.0e+10`, `- 1`,
	`true`, `tru`, `truex`, `false`, `null`, `nul`, `NaN`,
	`[{"id":1,"a":{"b":[1,2,{"id":4}]}}]`, `[1] x`, `[1]]`, "[1]\n", "\t{\"a\" :\r\n[ true ,null]}",
	strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth),
	strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1),
	strings.Repeat(`{"a":`, maxDepth) + "1" + strings.Repeat("}", maxDepth),
	strings.Repeat(`{"a":`, maxDepth+1) + "1" + strings.Repeat("}", maxDepth+1),
}

// TestValid: valid gives json.Valid's verdict on every seed, and says an
// answer is spaced exactly when json.Compact would change it.
func TestValid(t *testing.T) {
	for _, s := range validSeeds {
		checkValid(t, []byte(s))
	}
}

// FuzzValid holds valid to encoding/json on any input.
func FuzzValid(f *testing.F) {
	for _, s := range validSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(checkValid)
}

func checkValid(t *testing.T, b []byte) {
	ok, sp := valid(b)
	if want := json.Valid(b); ok != want {
		t.Fatalf("valid(%.80q) = %v, json.Valid says %v", b, ok, want)
	}
	if !ok {
		return
	}
	var c bytes.Buffer
	if err := json.Compact(&c, b); err != nil {
		t.Fatalf("compact: %v", err)
	}
	if want := c.String() != string(b); sp != want {
		t.Fatalf("valid(%.80q) spaced=%v, json.Compact changes it: %v", b, sp, want)
	}
}

// special8 finds a word's first special byte wherever it is, whatever
// the bytes around it, and flags none in a word of plain bytes.
func TestSpecial8(t *testing.T) {
	for _, fill := range []byte{'a', ' ', '!', 0x7f, 0x80, 0xa0, 0xff} {
		for p := range 8 {
			for c := range 256 {
				var w [8]byte
				for i := range w {
					w[i] = fill
				}
				w[p] = byte(c)
				if p < 7 {
					w[7] = '"' // a special byte above never hides the first
				}
				m := special8(binary.LittleEndian.Uint64(w[:]))
				first := 8
				for i, b := range w {
					if !strPlain[b] {
						first = i
						break
					}
				}
				got := 8
				if m != 0 {
					got = bits.TrailingZeros64(m) >> 3
				}
				if got != first {
					t.Fatalf("special8(%q): first special byte at %d, want %d", w, got, first)
				}
			}
		}
	}
}
