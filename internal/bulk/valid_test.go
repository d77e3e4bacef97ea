package bulk

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math/bits"
	"math/rand/v2"
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
	`[{"id":1,"a":{"b":[1,2,{"id":4}]}}]`, `[null,{"id":1},null]`, " [ null ,\n{\"id\":null} ] ", `[nul]`, `[null`, `[1] x`, `[1]]`, "[1]\n", "\t{\"a\" :\r\n[ true ,null]}",
	// Strings past shortWords words (strLong): an escape, a control
	// byte, an escaped quote or the end at each side of a word, an
	// escape as the last byte, no closing quote.
	`"` + strings.Repeat("a", 40) + `"`, `["` + strings.Repeat("b", 33) + `\"` + strings.Repeat("c", 33) + `"]`,
	`"` + strings.Repeat("d", 31) + `\u00e9` + strings.Repeat("e", 40) + `\n"`,
	"\"" + strings.Repeat("f", 45) + "\x1f" + strings.Repeat("g", 3) + "\"",
	"\"" + strings.Repeat("h", 40) + "\x00\"", "\"" + strings.Repeat("i", 70) + "\t" + strings.Repeat("j", 9) + "\"",
	`"` + strings.Repeat("k", 40) + `\`, `"` + strings.Repeat("l", 40) + `\u12`, `"` + strings.Repeat("m", 30),
	`"` + strings.Repeat("n", 36) + `\q"`, `"` + strings.Repeat("o", 36) + `\"`, `{"` + strings.Repeat("p", 33) + `\\":1}`,
	`"` + strings.Repeat(`\"x`, 30) + `"`, `"` + strings.Repeat("r", 41) + "\xff\x7f\x80" + strings.Repeat("s", 25) + `"`,
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

// BenchmarkValidBio is the validating pass alone (no element copied) over
// the demo upstream's answer shape, whose long strings strLong reads.
func BenchmarkValidBio(b *testing.B) {
	body, _ := bioAnswer()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if ok, _ := valid(body); !ok {
			b.Fatal("invalid")
		}
	}
}

// TestValidLongStrings holds valid to json.Valid on strings long enough
// for strLong, built from the bytes its searches and tests stop at (a
// quote, a backslash, escape letters, hex digits, control and non-ASCII
// bytes) among plain ones, so escapes, escaped quotes and control bytes
// fall at every place of a word and of a 32-byte block.
func TestValidLongStrings(t *testing.T) {
	const special = "\"\\\\\\u0fAnt/\x01\x1f\x7f\xff "
	rnd := rand.New(rand.NewPCG(23, 2))
	for range 20000 {
		b := []byte{'['}
		for e := range 1 + rnd.IntN(3) {
			if e > 0 {
				b = append(b, ',')
			}
			b = append(b, '"')
			// Plain runs of any length, mostly past strLong's start.
			for range rnd.IntN(160) {
				c := byte('a')
				if rnd.IntN(24) == 0 {
					c = special[rnd.IntN(len(special))]
				}
				b = append(b, c)
			}
			b = append(b, '"')
		}
		if rnd.IntN(8) > 0 {
			b = append(b, ']')
		}
		checkValid(t, b)
	}
}
