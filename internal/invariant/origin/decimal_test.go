package origin

import "testing"

// The exponent spellings traffic's multiSpelling draws name the resource
// their value does, as a Node origin's Number(id) reads them, and one in
// front of a slug as a PHP origin's (int) does; a slug with an 'e' in it
// stays a slug of its leading digits.
func TestResourceDecimal(t *testing.T) {
	for path, want := range map[string]string{"/r/0.5e1": "r/5", "/r/50e-1": "r/5", "/r/500E-2": "r/5", "/r/0.123e3": "r/123",
		"/r/5e2": "r/500", "/r/5.5": "r/5.5", "/r/5-acme": "r/5", "/r/5": "r/5",
		"/r/50e-1-x": "r/5", "/r/70e-1-x": "r/7", "/r/07-x": "r/7"} {
		if got := Resource(path); got != want {
			t.Errorf("Resource(%q) = %q, want %q", path, got, want)
		}
	}
}
