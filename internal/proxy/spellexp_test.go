package proxy_test

import (
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
)

// Ids spelled with a fraction or an exponent ("0.5e1", "50e-1", "5e2"):
// JavaScript's Number, PHP's (int) of a numeric string and MySQL's
// comparison of an integer column with a string read their value (5, 5,
// 500), Ruby's to_i and parseInt their leading digits (0, 50, 5).

// numberInt reads an id as a Node origin's Number(id) does: blanks around
// it, a decimal with a fraction or an exponent as its value (an integer
// or no id), anything else as leadingInt.
func numberInt(s string) (int, error) {
	t := strings.TrimFunc(s, func(r rune) bool { return unicode.IsSpace(r) || r == 0xfeff })
	if strings.ContainsAny(t, ".eE") && strings.Trim(t, "+-.eE0123456789") == "" {
		v, err := strconv.ParseFloat(t, 64)
		if err != nil || v != math.Trunc(v) || math.Abs(v) > 1<<53 {
			return 0, strconv.ErrSyntax
		}
		return int(v), nil
	}
	return leadingInt(s)
}

// A read through an exponent spelling is not stored, and a write through
// one drops the entries of every integer it reads as. Before, "0.5e1",
// "50e-1" and "5e2" were stored as slugs of 0, 50 and 5, and a write to
// "0.8e1" invalidated client:0 alone: each read below stayed a hit of
// "old" after the origin's client changed.
func TestExponentSpellings(t *testing.T) {
	for _, tc := range []struct {
		name, write string
		reads       []string
	}{
		{"read-0.5e1-50e-1", "/clients/5", []string{"/clients/50e-1", "/clients/0.5e1"}},
		{"read-5e2", "/clients/500", []string{"/clients/5e2", "/clients/5E2"}},
		{"write-0.8e1", "/clients/0.8e1", []string{"/clients/8", "/clients/8/summary"}},
		{"write-80e-1", "/clients/80e-1", []string{"/clients/8", "/clients/8/summary"}},
		{"write-8.0", "/clients/8.0", []string{"/clients/8"}},
	} {
		t.Run(tc.name, func(t *testing.T) { writeDropsEveryReading(t, numberInt, tc.write, tc.reads) })
	}
	// A canonical id is still stored; a spelling with a fraction or
	// exponent, even one of a single reading ("5.0"), is not.
	o := newOriginReading(t, numberInt)
	e := newEnv(t, o.upstream, []testRoute{clientRoute}, withRedis(t))
	for p, stored := range map[string]bool{"/clients/5": true, "/clients/5.0": false, "/clients/5e0": false, "/clients/0.5e1": false, "/clients/5.json": true} {
		e.get(p)
		if r, _ := e.get(p); strings.Contains(r.Header.Get("Cache-Status"), "hit") != stored {
			t.Errorf("second GET %s: %s, want stored %v", p, r.Header.Get("Cache-Status"), stored)
		}
	}
}

// phpInt reads an id as a PHP origin's (int) does (a leading-numeric
// string, since PHP 7.1 with its exponent; MySQL's comparison of an
// integer column reads the same number): C blanks, then the longest
// decimal number in front, truncated toward zero; the rest ignored.
func phpInt(s string) (int, error) {
	m := phpLead.FindString(strings.TrimLeft(s, " \t\n\v\f\r"))
	if m == "" {
		return 0, strconv.ErrSyntax
	}
	v, err := strconv.ParseFloat(m, 64)
	if err != nil || math.Abs(v) > 1<<53 {
		return 0, strconv.ErrSyntax
	}
	return int(math.Abs(math.Trunc(v))), nil
}

var phpLead = regexp.MustCompile(`^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?`)

// A number with a fraction or an exponent in front of a slug ("5e2-acme")
// is 500 to PHP's (int) and MySQL's comparison, 5 to Rails' find: a write
// spelled so drops both, and a read spelled so is not stored. Before, it
// read as the slug of 5 alone: the write left client:500's entries, and
// the read was stored tagged client:5, left by a write to client 500.
func TestNumberInFrontOfSlug(t *testing.T) {
	for _, tc := range []struct {
		name, write string
		reads       []string
	}{
		{"write-5e2-acme", "/clients/5e2-acme", []string{"/clients/500", "/clients/500/summary"}},
		{"write-80e-1-x", "/clients/80e-1-x", []string{"/clients/8", "/clients/8/summary"}},
		{"read-5e2-acme", "/clients/500", []string{"/clients/5e2-acme"}},
	} {
		t.Run(tc.name, func(t *testing.T) { writeDropsEveryReading(t, phpInt, tc.write, tc.reads) })
	}
}

// writeDropsEveryReading stores each of reads (twice, so a stored copy
// answers the second) in front of an origin that reads ids as read does,
// writes through write, and wants every read to answer the new version.
func writeDropsEveryReading(t *testing.T, read func(string) (int, error), write string, reads []string) {
	t.Helper()
	o := newOriginReading(t, read)
	wr := testRoute{Name: "client-write", Methods: []string{"PATCH"}, Pattern: "/clients/{id}", Invalidate: []string{"client:{id}"}}
	summary := testRoute{Name: "summary", Pattern: "/clients/{id}/summary", TTL: time.Minute, Tags: []string{"client:{id}"}}
	e := newEnv(t, o.upstream, []testRoute{summary, clientRoute, wr}, withRedis(t))
	for _, p := range reads {
		e.get(p)
		e.get(p)
	}
	if code := patch(t, e, write, "new"); code != http.StatusNoContent {
		t.Fatalf("PATCH %s: %d", write, code)
	}
	for _, p := range reads {
		if r, b := e.get(p); b != "new" {
			t.Errorf("GET %s after PATCH %s = %q (%s), want new", p, write, b, r.Header.Get("Cache-Status"))
		}
	}
}
