package redisbudget

import (
	"context"
	"net/http"
	"testing"
	"time"
)

func TestOneBudgetPerRequest(t *testing.T) {
	base := context.WithValue(context.Background(), http.ServerContextKey, "srv")
	if From(base) != nil {
		t.Fatal("a context without a budget has one")
	}
	ctx := New(base)
	b := From(ctx)
	if b == nil {
		t.Fatal("New carries no budget")
	}
	if New(ctx) != ctx || From(context.WithoutCancel(ctx)) != b {
		t.Fatal("a request's later steps get another budget")
	}
	if ctx.Value(http.ServerContextKey) != "srv" {
		t.Fatal("the parent's values are lost")
	}
	b.Spend(30 * time.Millisecond)
	b.Spend(-time.Second) // a clock step back charges nothing
	if got := b.Left(100 * time.Millisecond); got != 70*time.Millisecond {
		t.Fatalf("Left = %v, want 70ms", got)
	}
}

// holder is a context that holds a Budget in its own allocation, as a
// flight's context does (coalesce.Flight.Carry).
type holder struct {
	context.Context
	b Budget
}

func (h *holder) Value(k any) any {
	if v := h.b.Value(k); v != nil {
		return v
	}
	return h.Context.Value(k)
}

// A budget held elsewhere is ctx's budget (Budget.Value), shared by the
// calls made after the flight (With), and Without hides it as it hides
// New's; a budget spent through one context is spent through the others.
func TestHeldBudget(t *testing.T) {
	base := context.WithValue(context.Background(), http.ServerContextKey, "srv")
	h := &holder{Context: base}
	if From(h) != &h.b || New(h) != context.Context(h) {
		t.Fatal("a held budget is not the context's")
	}
	if h.b.Value(http.ServerContextKey) != nil {
		t.Fatal("a budget answers another key")
	}
	ctx := With(base, &h.b)
	if From(ctx) != &h.b || With(ctx, &h.b) != ctx || New(ctx) != ctx {
		t.Fatal("With: not the held budget")
	}
	if ctx.Value(http.ServerContextKey) != "srv" {
		t.Fatal("With lost the parent's values")
	}
	if From(Without(h)) != nil || From(Without(ctx)) != nil {
		t.Fatal("Without kept a held budget")
	}
	From(ctx).Spend(60 * time.Millisecond)
	From(h).Spend(30 * time.Millisecond)
	if got := h.b.Left(100 * time.Millisecond); got != 10*time.Millisecond {
		t.Fatalf("Left = %v, want 10ms: the contexts do not share the budget", got)
	}
}
