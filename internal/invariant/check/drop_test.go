package check

import (
	"testing"
	"time"
)

// A write acknowledged while Redis is down for a restart holds nothing
// until the replicas have published their replays (EndOutage), and then
// holds from that time on, to max-lag only; one acknowledged before the
// outage is demoted only after a snapshot restart, and only when it came
// after the SAVE.
func TestOutageDefersAcknowledgements(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 11, 0, 0, 0, time.UTC)
	for _, snapshot := range []bool{false, true} {
		ch := &Checker{acks: map[string][]ack{}, checked: map[string]int{}}
		ch.Acknowledge("r/1", "/r/1", 1, t0, 0)                    // before the SAVE
		ch.Acknowledge("r/2", "/r/2", 1, t0.Add(2*time.Second), 1) // after it
		saved := t0.Add(time.Second)
		demoted := ch.StartOutage(snapshot, saved)
		ch.Acknowledge("r/3", "/r/3", 1, t0.Add(3*time.Second), 0) // during the outage
		if len(ch.acks["r/3"]) != 0 {
			t.Fatalf("snapshot %v: a write acknowledged during the outage held reads at once: %v", snapshot, ch.acks["r/3"])
		}
		end := t0.Add(5 * time.Second)
		if n := ch.EndOutage(end); n != 1 {
			t.Errorf("snapshot %v: EndOutage held %d writes, want 1", snapshot, n)
		}
		if a := ch.acks["r/3"]; len(a) != 1 || !a[0].at.Equal(end) || a[0].replica != -1 {
			t.Errorf("snapshot %v: the outage's write is held as %+v, want from %v to max-lag only", snapshot, a, end)
		}
		want := 0
		if snapshot {
			want = 1
		}
		if demoted != want || ch.acks["r/1"][0].replica != 0 || (ch.acks["r/2"][0].replica == -1) != snapshot {
			t.Errorf("snapshot %v: demoted %d (r/1 %+v, r/2 %+v), want %d: only the write after the SAVE", snapshot, demoted, ch.acks["r/1"], ch.acks["r/2"], want)
		}
		ch.Acknowledge("r/4", "/r/4", 1, end.Add(time.Second), 1)
		if len(ch.acks["r/4"]) != 1 {
			t.Errorf("snapshot %v: a write acknowledged after the outage was not held", snapshot)
		}
	}
}

// A write acknowledged while Redis stalls holds its own replica's reads at
// once, and the others' only from EndOutage on, to max-lag.
func TestStallHoldsOwnReplicaAtOnce(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 11, 0, 0, 0, time.UTC)
	ch := &Checker{acks: map[string][]ack{}, checked: map[string]int{}}
	ch.StartStall()
	ch.Acknowledge("r/3", "/r/3", 1, t0, 0)
	if a := ch.acks["r/3"]; len(a) != 1 || a[0].replica != 0 || !a[0].ownOnly || !a[0].at.Equal(t0) {
		t.Fatalf("a write acknowledged during the stall is held as %+v, want at once through its own replica only", a)
	}
	end := t0.Add(5 * time.Second)
	if n := ch.EndOutage(end); n != 1 {
		t.Errorf("EndOutage held %d writes, want 1", n)
	}
	if a := ch.acks["r/3"]; len(a) != 2 || !a[1].at.Equal(end) || a[1].replica != -1 || a[1].ownOnly {
		t.Errorf("after the stall the write is held as %+v, want also from %v to max-lag", a, end)
	}
	ch.Acknowledge("r/4", "/r/4", 1, end.Add(time.Second), 1)
	if a := ch.acks["r/4"]; len(a) != 1 || a[0].ownOnly {
		t.Errorf("a write acknowledged after the stall is held as %+v, want as any other", a)
	}
}
