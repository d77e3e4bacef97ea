package accesslog

import (
	"context"
	"testing"
	"time"
)

func TestRecordTravelsInTheContext(t *testing.T) {
	if FromContext(context.Background()) != nil {
		t.Fatal("a context without a record returned one")
	}
	ctx, rec := WithRecord(context.Background())
	FromContext(ctx).Route = "client"
	FromContext(ctx).Upstream = 3 * time.Millisecond
	if rec.Route != "client" || rec.Upstream != 3*time.Millisecond {
		t.Errorf("record = %+v, want what was filled in through the context", rec)
	}
}
