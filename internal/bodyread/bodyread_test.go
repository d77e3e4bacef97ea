package bodyread

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// Limited, and LimitedTo into a buffer of any size, read what io.ReadAll
// over a limit+1 reader reads, whatever the announced size says, including
// bodies longer or shorter than announced and reads of one byte at a time.
func TestReadAllMatchesReadAll(t *testing.T) {
	for _, body := range []string{"", "x", strings.Repeat("b", 100), strings.Repeat("c", 5000)} {
		for _, limit := range []int64{0, 1, 99, 100, 101, 10000} {
			for _, size := range []int64{-1, 0, 1, int64(len(body)), int64(len(body)) + 7, limit + 1} {
				want, _ := io.ReadAll(io.LimitReader(strings.NewReader(body), limit+1))
				for _, r := range []io.Reader{strings.NewReader(body), iotest.OneByteReader(strings.NewReader(body))} {
					got, err := Limited(r, size, limit)
					if err != nil || !bytes.Equal(got, want) {
						t.Fatalf("body %d B, size %d, limit %d: got %d B (%v), want %d B", len(body), size, limit, len(got), err, len(want))
					}
				}
				for _, room := range []int{1, len(body), len(body) + 1, 20000} {
					for _, r := range []io.Reader{strings.NewReader(body), iotest.OneByteReader(strings.NewReader(body))} {
						buf := bytes.Repeat([]byte{'?'}, room)[:0]
						got, err := LimitedTo(buf, r, size, limit)
						if err != nil || !bytes.Equal(got, want) {
							t.Fatalf("LimitedTo %d B of room: body %d B, size %d, limit %d: got %d B (%v), want %d B", room, len(body), size, limit, len(got), err, len(want))
						}
					}
				}
			}
		}
	}
}
