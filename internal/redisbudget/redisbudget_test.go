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
