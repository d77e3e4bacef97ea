package route

import "testing"

func TestFillPattern(t *testing.T) {
	tests := []struct {
		pattern, param, value, want string
	}{
		{"/users/{id}", "id", "42", "/users/42"},
		{"/users/{id:[0-9]+}", "id", "42", "/users/42"},
		{"/orgs/{org}/users/{id}", "id", "7", "/orgs/{org}/users/7"},
		{"/a/{id}/b/{id}", "id", "x", "/a/x/b/x"},
		{"/files/{name}.{ext}", "name", "f", "/files/f.{ext}"},
		{"/static", "id", "1", "/static"},
		{"/broken/{id", "id", "1", "/broken/{id"},
		{"/users/{id}", "id", "a b/%2F", "/users/a b/%2F"}, // raw: a decoded path
	}
	for _, tt := range tests {
		if got := FillPattern(tt.pattern, tt.param, tt.value); got != tt.want {
			t.Errorf("FillPattern(%q, %q, %q) = %q, want %q", tt.pattern, tt.param, tt.value, got, tt.want)
		}
	}
}
