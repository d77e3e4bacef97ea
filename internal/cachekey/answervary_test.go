package cachekey

import (
	"net/http"
	"slices"
	"testing"
)

// An answer compressed without naming Accept-Encoding in its Vary still
// varies on it: it is kept as the variant it is.
func TestAnswerVary(t *testing.T) {
	tests := []struct {
		name string
		h    http.Header
		want []string
		star bool
	}{
		{"none", http.Header{}, nil, false},
		{"vary only", http.Header{"Vary": {"accept-language"}}, []string{"Accept-Language"}, false},
		{"gzip without vary", http.Header{"Content-Encoding": {"gzip"}}, []string{"Accept-Encoding"}, false},
		{"identity coding", http.Header{"Content-Encoding": {"Identity"}, "Vary": {"X-A"}}, []string{"X-A"}, false},
		{"gzip, other vary: sorted", http.Header{"Content-Encoding": {"br"}, "Vary": {"X-Z, Accept-Language"}}, []string{"Accept-Encoding", "Accept-Language", "X-Z"}, false},
		{"already named", http.Header{"Content-Encoding": {"gzip"}, "Vary": {"Accept-Encoding"}}, []string{"Accept-Encoding"}, false},
		{"gzip on a second line", http.Header{"Content-Encoding": {"identity", "gzip"}}, []string{"Accept-Encoding"}, false},
		{"identity on two lines", http.Header{"Content-Encoding": {"", "identity"}}, nil, false},
		{"star", http.Header{"Vary": {"*"}}, nil, true},
		{"star, compressed", http.Header{"Vary": {"*"}, "Content-Encoding": {"gzip"}}, []string{"Accept-Encoding"}, true},
	}
	for _, tc := range tests {
		names, star := AnswerVary(tc.h)
		if !slices.Equal(names, tc.want) || star != tc.star {
			t.Errorf("%s: got %v, %v; want %v, %v", tc.name, names, star, tc.want, tc.star)
		}
	}
}
