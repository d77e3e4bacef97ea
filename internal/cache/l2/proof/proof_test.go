package proof

import (
	"testing"
	"time"
)

// TestBeatAckedAcrossConfirmationIsNoLoss is the bookkeeping behind a
// spurious gap seen in CI: beat 5's PUBLISH was sent while the
// subscription was being confirmed, and its acknowledgement was processed
// after the confirmation. Redis may have run it before the subscription
// existed, so its not coming back is the gap's (Floor), not a loss: beat 6
// arriving first must not report one. A beat sent after the confirmation
// that is skipped still is.
func TestBeatAckedAcrossConfirmationIsNoLoss(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name string
		run  func(s *Tracker) bool // reports Heard's verdict
		lost bool
	}{
		{"acked after confirmation, sent before", func(s *Tracker) bool {
			s.Sending(5)
			s.ForgetAcked() // subscription confirmed while 5 was on its way
			s.Published(5)
			return s.Heard(6, now, now)
		}, false},
		{"sent and acked after confirmation, skipped", func(s *Tracker) bool {
			s.ForgetAcked()
			s.Sending(5)
			s.Published(5)
			s.Sending(6)
			s.Published(6)
			if s.Heard(5, now, now) {
				t.Error("beat 5 heard in order reported a loss")
			}
			s.Sending(7)
			s.Published(7)
			return s.Heard(8, now, now) // 6 and 7 acked, never heard
		}, true},
		{"acked before confirmation", func(s *Tracker) bool {
			s.Sending(5)
			s.Published(5)
			s.ForgetAcked()
			return s.Heard(6, now, now)
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := New(time.Second * 3 / 4)
			if got := tc.run(s); got != tc.lost {
				t.Fatalf("Heard reported lost=%v, want %v", got, tc.lost)
			}
		})
	}
}
