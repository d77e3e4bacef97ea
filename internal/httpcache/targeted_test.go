package httpcache

import (
	"net/http"
	"testing"
	"time"
)

// A no-store in CDN-Cache-Control or Surrogate-Control, however it is
// spelt, makes an answer one client's (Private) and unstorable in origin
// mode even where the targets do not select the field.
func TestTargetedNoStore(t *testing.T) {
	tests := []struct {
		h    http.Header
		want bool
	}{
		{http.Header{"Surrogate-Control": {"no-store"}}, true},
		{http.Header{"Cdn-Cache-Control": {"NO-STORE"}}, true},
		{http.Header{"Surrogate-Control": {"max-age=60;no-store"}}, true},
		{http.Header{"Surrogate-Control": {"no-store;edge1"}}, true},
		{http.Header{"Cdn-Cache-Control": {"max-age=60 no-store"}}, true},
		{http.Header{"Surrogate-Control": {"max-age=60", "no-store"}}, true},
		{http.Header{"Surrogate-Control": {`content="ESI/1.0", max-age=60`}}, false},
		{http.Header{"Cdn-Cache-Control": {"max-age=60"}}, false},
		{http.Header{"Cdn-Cache-Control": {`no-cache="no-store"`}}, false},
		{http.Header{"X-Surrogate-Control": {"no-store"}}, false},
	}
	now := time.Now()
	for _, tt := range tests {
		if got := TargetedNoStore(tt.h); got != tt.want {
			t.Errorf("TargetedNoStore(%v) = %v, want %v", tt.h, got, tt.want)
		}
		if got := Private(tt.h); got != tt.want {
			t.Errorf("Private(%v) = %v, want %v", tt.h, got, tt.want)
		}
		h := tt.h.Clone()
		h.Set("Cache-Control", "public, max-age=60")
		for _, targets := range [][]string{nil, {}, {"Cdn-Cache-Control"}} {
			s := Origin{Targets: targets}.Storage(200, h, h, now, now)
			if s.Shareable == tt.want {
				t.Errorf("origin mode, targets %q, %v: Shareable %v", targets, h, s.Shareable)
			}
		}
	}
}
