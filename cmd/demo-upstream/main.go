// Command demo-upstream runs the stand-in DB-backed service of package demo,
// for trying sidecache by hand and for the benchmark (make bench).
//
//	demo-upstream -listen 127.0.0.1:3000 -slots 10 -query-time 5ms [-framework]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sidecache/sidecache/internal/demo"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("demo-upstream: ")
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	var (
		listen  = flag.String("listen", "127.0.0.1:3000", "`address` to listen on (port 0 picks a free one)")
		opts    demo.Options
		clients = flag.Int("clients", 10000, "number of clients (IDs 1..N)")
		users   = flag.Int("users", 10000, "number of users (IDs 1..N)")
	)
	flag.IntVar(&opts.Slots, "slots", 10, "concurrent queries (\"DB connections\")")
	flag.DurationVar(&opts.QueryTime, "query-time", 5*time.Millisecond, "time each query holds its slot (negative: none)")
	flag.DurationVar(&opts.PerRowTime, "per-row-time", 50*time.Microsecond, "extra time per ID of a bulk query or row of a list (negative: none)")
	flag.BoolVar(&opts.Framework, "framework", false, "answer as a framework's defaults would (Express + compression()): Vary: Accept-Encoding, gzip over 1 KiB, weak ETags, case-insensitive routes, lenient int IDs, 500 for a non-int4 ID")
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", flag.Args())
	}
	opts.Clients, opts.Users = *clients, *users

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: demo.New(opts), ReadHeaderTimeout: 10 * time.Second}
	// One line on start, with the real address: with -listen :0 this is
	// how a script learns the port.
	log.Printf("listening on http://%s (slots=%d query-time=%s per-row-time=%s clients=%d users=%d framework=%v)",
		ln.Addr(), opts.Slots, opts.QueryTime, opts.PerRowTime, opts.Clients, opts.Users, opts.Framework)

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}
