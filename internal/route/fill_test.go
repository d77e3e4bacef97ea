package route

import "testing"

func TestFillPattern(t *testing.T) {
	tests := []struct {
		pattern, param, value, want string
	}{
		{"/users/{id}", "id", "42", "/users/42"},
		{"/users/{id:[0-9]+}", "id", "42", "/users/42"},
		{"/users/{id:[0-9]{3}}", "id", "042", "/users/042"}, // a repetition's braces are the regexp's
		{"/users/{id:[a-f]{2,4}}/x/{n:[0-9]{1}}", "n", "5", "/users/{id:[a-f]{2,4}}/x/5"},
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
