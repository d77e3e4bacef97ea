package resp

import (
	"context"
	"reflect"
	"testing"

	"github.com/sidecache/sidecache/internal/redistest"
)

// TestCommand: a command is an array of bulk strings, lengths in bytes.
func TestCommand(t *testing.T) {
	if got := string(Command("PUBLISH", "c", "x")); got != "*3\r\n$7\r\nPUBLISH\r\n$1\r\nc\r\n$1\r\nx\r\n" {
		t.Fatalf("command: %q", got)
	}
	if got := string(Command("SET", "k", "é\r\n")); got != "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$4\r\né\r\n\r\n" {
		t.Fatalf("command with CRLF and UTF-8: %q", got)
	}
}

// TestDo reads each reply type a real Redis sends: simple string, bulk
// string (binary-safe), integer, nil, array and error.
func TestDo(t *testing.T) {
	rs := redistest.Start(t)
	ctx := context.Background()
	c, err := Dial(ctx, rs.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, tc := range []struct {
		args []string
		want any
	}{
		{[]string{"PING"}, "PONG"},
		{[]string{"SET", "k", "a\r\nb"}, "OK"},
		{[]string{"GET", "k"}, "a\r\nb"},
		{[]string{"INCR", "n"}, int64(1)},
		{[]string{"GET", "missing"}, nil},
		{[]string{"MGET", "k", "missing", "n"}, []any{"a\r\nb", nil, "1"}},
	} {
		got, err := c.Do(tc.args...)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Fatalf("%q: %#v, %v; want %#v", tc.args, got, err, tc.want)
		}
	}
	if _, err := c.Do("NOSUCHCOMMAND"); err == nil {
		t.Fatal("an error reply came back without an error")
	}
	if got, err := Do(ctx, rs.Addr(), "GET", "k"); err != nil || got != "a\r\nb" {
		t.Fatalf("one-shot Do: %#v, %v", got, err)
	}
}
