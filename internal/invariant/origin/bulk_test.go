package origin_test

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/sidecache/sidecache/internal/invariant/origin"
)

// TestCrowdRound: the origin tells a crowd round's bulk calls by their
// ids, good or bad, and no ordinary round's id passes for one.
func TestCrowdRound(t *testing.T) {
	for id, want := range map[string]int{"100001": 0, "195006": 95, "171096": 71, "80009592296622685407": 95, "80000700000000000000": 7} {
		if k, ok := origin.CrowdRound(id); !ok || k != want {
			t.Errorf("CrowdRound(%q) = %d, %v; want %d", id, k, ok, want)
		}
	}
	for _, id := range []string{"1", "64", "99999999999999999999", "90009592296622685407", "x", ""} {
		if k, ok := origin.CrowdRound(id); ok {
			t.Errorf("CrowdRound(%q) = %d, want none", id, k)
		}
	}
}

// TestAbsentIDs (bulk-null): the origin has no absent id — 404 called
// directly — and its bulk endpoint leaves one out, or writes null in its
// place while Profile.NullAbsent is on, as a DataLoader batch function
// does; an answer of absent ids only is an empty array, never null.
func TestAbsentIDs(t *testing.T) {
	o := origin.NewOrigin(1)
	defer o.Close()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(o.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	if code, _ := get("/u/" + origin.AbsentID(0)); code != http.StatusNotFound {
		t.Errorf("GET /u/%s: %d, want 404", origin.AbsentID(0), code)
	}
	if code, _ := get("/u/3"); code != http.StatusOK {
		t.Errorf("GET /u/3: %d, want 200", code)
	}
	for _, null := range []bool{false, true} {
		o.SetProfile(origin.BulkProfile, origin.Profile{NullAbsent: null})
		code, body := get("/u?ids=3," + origin.AbsentID(1) + ",5")
		var got []*origin.Stamp
		if err := json.Unmarshal([]byte(body), &got); code != http.StatusOK || err != nil {
			t.Fatalf("NullAbsent %v: %d %q %v", null, code, body, err)
		}
		want := []string{"3", "5"}
		if null {
			want = []string{"3", "", "5"}
		}
		var ids []string
		for _, st := range got {
			id := ""
			if st != nil {
				id = st.ID
			}
			ids = append(ids, id)
		}
		if !slices.Equal(ids, want) {
			t.Errorf("NullAbsent %v: elements %q (%s), want %q (\"\": null)", null, ids, body, want)
		}
		if code, body := get("/u?ids=" + origin.AbsentID(2)); code != http.StatusOK || body != map[bool]string{false: "[]", true: "[null]"}[null] {
			t.Errorf("NullAbsent %v: an absent id alone answered %d %q", null, code, body)
		}
	}
	if n := o.Nulls.Load(); n != 2 {
		t.Errorf("Nulls = %d, want 2", n)
	}
}
