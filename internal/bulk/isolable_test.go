package bulk

import "testing"

func TestIsolable(t *testing.T) {
	for code, want := range map[int]bool{
		400: true, 404: true, 413: true, 414: true, 422: true, 499: true,
		408: false, 429: false, // the upstream asks for fewer calls
		200: false, 304: false, 399: false, 500: false, 502: false, 503: false, 0: false,
	} {
		if got := Isolable(code); got != want {
			t.Errorf("Isolable(%d) = %v, want %v", code, got, want)
		}
	}
}
