package surrogate_test

import (
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/sidecache/sidecache/internal/surrogate"
)

func TestInvalidated(t *testing.T) {
	target := &url.URL{Path: "/clients/7"}
	// Paths under /clients/ are stored, and none over 20 bytes.
	stored := func(p string) bool { return strings.HasPrefix(p, "/clients/") && len(p) <= 20 }
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i+1 < len(kv); i += 2 {
			out.Set(kv[i], kv[i+1])
		}
		return out
	}
	tag := surrogate.URITag
	tests := []struct {
		name   string
		code   int
		target *url.URL
		answer http.Header
		want   []string
	}{
		{"200: the target", 200, target, h(), []string{tag("/clients/7")}},
		{"201 with Location", 201, target, h("Location", "/clients/8"), []string{tag("/clients/7"), tag("/clients/8")}},
		{"303 with both, relative", 303, target, h("Location", "9", "Content-Location", "http://app.example/clients/10"),
			[]string{tag("/clients/7"), tag("/clients/9"), tag("/clients/10")}},
		{"each once", 204, target, h("Location", "/clients/7", "Content-Location", "7"), []string{tag("/clients/7")}},
		{"another origin", 200, target, h("Location", "http://evil.example/clients/8"), []string{tag("/clients/7")}},
		{"the upstream's origin", 200, target, h("Location", "http://upstream:8080/clients/8"), []string{tag("/clients/7"), tag("/clients/8")}},
		{"not stored", 200, target, h("Location", "/users/8", "Content-Location", "/clients/0123456789012"), []string{tag("/clients/7")}},
		{"target not stored", 200, &url.URL{Path: "/users/1"}, h("Location", "/clients/8"), []string{tag("/clients/8")}},
		{"empty path", 200, &url.URL{}, h(), nil},
		{"no answer: the target", 0, target, h("Location", "/clients/8"), []string{tag("/clients/7")}},
		{"502: the target", 502, target, h("Location", "/clients/8"), []string{tag("/clients/7")}},
		{"504: the target", 504, target, h(), []string{tag("/clients/7")}},
		{"404: none", 404, target, h("Location", "/clients/8"), nil},
		{"500: none", 500, target, h(), nil},
		{"503: none", 503, target, h(), nil},
		{"1xx: none", 103, target, h(), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := surrogate.Invalidated(tt.code, tt.target, tt.answer, stored, "app.example", "upstream:8080")
			if len(got) == 0 && len(tt.want) == 0 {
				return
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
