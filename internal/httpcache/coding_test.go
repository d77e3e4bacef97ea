package httpcache

import (
	"net/http"
	"reflect"
	"testing"
)

// TestContentCoding: every Content-Encoding line is read, as the one list
// they are (RFC 9110 §5.3); empty elements and identity name nothing.
func TestContentCoding(t *testing.T) {
	tests := []struct {
		lines []string
		want  string
	}{
		{nil, ""},
		{[]string{""}, ""},
		{[]string{"identity"}, ""},
		{[]string{" gzip "}, "gzip"},
		{[]string{"", "gzip"}, "gzip"},
		{[]string{"identity", "gzip"}, "gzip"},
		{[]string{"Identity, ", "br"}, "br"},
		{[]string{"gzip", "br"}, "gzip, br"},
		{[]string{"gzip,br"}, "gzip, br"},
	}
	for _, tt := range tests {
		h := http.Header{}
		if tt.lines != nil {
			h["Content-Encoding"] = tt.lines
		}
		if got := ContentCoding(h); got != tt.want {
			t.Errorf("%q: %q, want %q", tt.lines, got, tt.want)
		}
	}
}

// TestStoredHeaderFoldsCoding: a stored header says its coding on one
// line, the one every reader then reads.
func TestStoredHeaderFoldsCoding(t *testing.T) {
	for lines, want := range map[[2]string][]string{
		{"", "gzip"}:         {"gzip"},
		{"identity", "gzip"}: {"gzip"},
		{"identity", ""}:     nil,
	} {
		h := StoredHeader(http.Header{"Content-Encoding": lines[:]})
		if got := h["Content-Encoding"]; !reflect.DeepEqual(got, want) {
			t.Errorf("%q: stored %q, want %q", lines, got, want)
		}
	}
}
