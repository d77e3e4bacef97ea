package coalesce

import (
	"context"
	"errors"
	"testing"
	"time"
)

type detachedKey struct{}

// The context a flight's steps run with is context.WithoutCancel of the
// leader's in every respect a step can see: the leader's values, no
// deadline, no Done, no error and no cause once the leader's context
// ends, and a context derived from it is not cancelled by that end.
func TestFlightContextIsDetached(t *testing.T) {
	for _, via := range []string{"DoThen", "Do"} {
		t.Run(via, func(t *testing.T) {
			var g Group[int]
			parent, cancel := context.WithCancelCause(context.WithValue(context.Background(), detachedKey{}, "v"))
			parent, stop := context.WithDeadline(parent, time.Now().Add(time.Hour))
			defer stop()
			check := func(ctx context.Context) (int, error) {
				cancel(errors.New("client left"))
				<-parent.Done()
				child, cancelChild := context.WithCancel(ctx)
				defer cancelChild()
				_, hasDeadline := ctx.Deadline()
				switch {
				case ctx.Value(detachedKey{}) != "v":
					return 0, errors.New("the leader's value is lost")
				case hasDeadline || ctx.Done() != nil || ctx.Err() != nil:
					return 0, errors.New("the leader's deadline or cancellation reached the flight")
				case context.Cause(ctx) != nil:
					return 0, errors.New("the leader's cause reached the flight")
				case child.Err() != nil:
					return 0, errors.New("a context derived from the flight's was cancelled with the leader's")
				}
				return 1, nil
			}
			var v int
			var err error
			if via == "Do" {
				done := make(chan struct{})
				go func() {
					defer close(done)
					_, _, _ = g.Do(parent, "k", func(ctx context.Context) (int, error) {
						v, err = check(ctx)
						return v, err
					})
				}()
				<-done
				// The leader may have left before fn ran: wait for the flight.
				for g.Finished() == 0 {
					time.Sleep(time.Millisecond)
				}
			} else {
				_, _, _ = g.DoThen(parent, "k", func(ctx context.Context, _ *Flight[int]) (int, Next[int], error) {
					v, err = check(ctx)
					return v, Next[int]{}, err
				})
			}
			if err != nil || v != 1 {
				t.Fatal(v, err)
			}
		})
	}
}

// DoThenIn's flight is the one in makes, made only for the caller that
// leads: a caller that joins a flight in progress has in not called.
func TestDoThenInUsesTheGivenFlight(t *testing.T) {
	var g Group[string]
	var fl Flight[string]
	made := 0
	in := func() *Flight[string] { made++; return &fl }
	handed := make(chan *Flight[string], 1)
	done := make(chan outcome, 1)
	go func() {
		v, l, err := g.DoThenIn(context.Background(), "k", in, func(_ context.Context, f *Flight[string]) (string, Next[string], error) {
			handed <- f
			return "", Next[string]{Handed: true}, nil
		})
		done <- outcome{v, l, err}
	}()
	f := <-handed
	if f != &fl || made != 1 {
		t.Fatalf("leader's flight %p (in called %d times), want the one in made (%p)", f, made, &fl)
	}
	if c, leader := g.joinIn("k", func() *Flight[string] { t.Error("in called for a joiner"); return new(Flight[string]) }); c != f || leader {
		t.Fatalf("joiner got %p (leader %v), want the flight in progress %p", c, leader, f)
	}
	f.Finish("v", nil)
	if o := <-done; o.v != "v" || !o.leader || o.err != nil {
		t.Fatalf("leader: %+v", o)
	}
}

type carriedKey struct{}

// carrier answers carriedKey only, as redisbudget.Budget answers its own
// (v held boxed: a string boxed on each answer would be an allocation of
// the carrier's, not of the lookup).
type carrier struct{ v any }

func (c *carrier) Value(key any) any {
	if key == (carriedKey{}) {
		return c.v
	}
	return nil
}

// A value the leader carries in its flight (Carry, from DoThenIn's in)
// is its steps' context's, before the leader's values; every other key
// is still the leader's, and the leader's own context does not see it.
func TestFlightCarries(t *testing.T) {
	var g Group[int]
	parent := context.WithValue(context.WithValue(context.Background(), detachedKey{}, "v"), carriedKey{}, "parent's")
	var fl struct {
		Flight[int]
		c carrier
	}
	in := func() *Flight[int] {
		fl.c.v = "carried"
		fl.Carry(&fl.c)
		return &fl.Flight
	}
	_, _, err := g.DoThenIn(parent, "k", in, func(ctx context.Context, _ *Flight[int]) (int, Next[int], error) {
		switch {
		case ctx.Value(carriedKey{}) != "carried":
			return 0, Next[int]{}, errors.New("the carried value is not the flight's context's")
		case ctx.Value(detachedKey{}) != "v":
			return 0, Next[int]{}, errors.New("the leader's value is lost")
		case context.WithValue(ctx, detachedKey{}, "w").Value(carriedKey{}) != "carried":
			return 0, Next[int]{}, errors.New("a context derived from the flight's lost the carried value")
		}
		return 1, Next[int]{}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if parent.Value(carriedKey{}) != "parent's" {
		t.Fatal("the leader's own context changed")
	}
}
