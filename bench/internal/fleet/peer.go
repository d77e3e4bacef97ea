package fleet

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sidecache/sidecache/bench/internal/resp"
)

// A peer is one emulated replica: a subscription connection reading every
// message Redis delivers to it, and a command connection publishing its
// heartbeats, as a sidecache replica does, without the HTTP side. It
// speaks RESP2 on bare sockets and keeps only counters, so a thousand of
// them cost the bench little CPU next to what they make Redis do.
type peer struct {
	id       string
	protocol string // ProtocolOwn or ProtocolShared
	prefix   string
	sub, pub net.Conn

	msgs atomic.Int64 // every message delivered to it
	invs atomic.Int64 // the bench writer's invalidations
	own  atomic.Int64 // its own beats back
	hist *histogram   // reach latency of the writer's invalidations
}

const (
	// ProtocolOwn is this release's: each replica beats on P beat:<id>,
	// subscribed with P invalidate on one connection.
	ProtocolOwn = "own"
	// ProtocolShared is 16d946c's: every replica beats on P invalidate.
	ProtocolShared = "shared"
	// ProtocolPing is the alternative the issue weighed and sidecache did
	// not take (docs/coherence.md): the beat is a PING on the
	// subscription connection, answered behind what is queued for it.
	ProtocolPing = "ping"
)

// dialPeer subscribes on subAddr (the master, or a relay: one of its read
// replicas) and publishes its beats on pubAddr (the master).
func dialPeer(ctx context.Context, subAddr, pubAddr, prefix, protocol, id string, hist *histogram) (*peer, error) {
	var d net.Dialer
	sub, err := d.DialContext(ctx, "tcp", subAddr)
	if err != nil {
		return nil, err
	}
	pub, err := d.DialContext(ctx, "tcp", pubAddr)
	if err != nil {
		sub.Close()
		return nil, err
	}
	p := &peer{id: id, protocol: protocol, prefix: prefix, sub: sub, pub: pub, hist: hist}
	chans := []string{prefix + "invalidate"}
	if protocol == ProtocolOwn {
		chans = append(chans, p.beatChannel())
	}
	if _, err := sub.Write(resp.Command(append([]string{"SUBSCRIBE"}, chans...)...)); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

func (p *peer) beatChannel() string { return p.prefix + "beat:" + p.id }

func (p *peer) close() {
	p.sub.Close()
	p.pub.Close()
}

// run reads and beats until ctx ends.
func (p *peer) run(ctx context.Context, every time.Duration, wg *sync.WaitGroup) {
	wg.Add(2)
	go func() { defer wg.Done(); p.read() }()
	go func() { defer wg.Done(); p.beat(ctx, every) }()
	go func() { <-ctx.Done(); p.close() }()
}

func (p *peer) beat(ctx context.Context, every time.Duration) {
	// Spread the fleet's beats over the period, as independent replicas are.
	select {
	case <-ctx.Done():
		return
	case <-time.After(rand.N(every)):
	}
	t := time.NewTicker(every)
	defer t.Stop()
	if p.protocol == ProtocolPing {
		p.ping(ctx, t)
		return
	}
	rd := bufio.NewReader(p.pub)
	ch := p.beatChannel()
	if p.protocol == ProtocolShared {
		ch = p.prefix + "invalidate"
	}
	for seq := 1; ; seq++ {
		msg := fmt.Sprintf(`{"origin":%q,"beat":{"seq":%d,"sent":%d}}`, p.id, seq, time.Now().UnixNano())
		if _, err := p.pub.Write(resp.Command("PUBLISH", ch, msg)); err != nil {
			return
		}
		if _, err := rd.ReadSlice('\n'); err != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// ping beats with PINGs on the subscription connection; read counts the
// pongs.
func (p *peer) ping(ctx context.Context, t *time.Ticker) {
	for seq := 1; ; seq++ {
		if _, err := p.sub.Write(resp.Command("PING", fmt.Sprintf("beat:%d:%d", seq, time.Now().UnixNano()))); err != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

var (
	fleetTag = []byte(`"fleet:`)
	beatKey  = []byte(`"beat"`)
)

func (p *peer) read() {
	rd := bufio.NewReaderSize(p.sub, 16<<10)
	origin := []byte(`"origin":"` + p.id + `"`)
	for {
		kind, ch, payload, err := readPush(rd)
		if err != nil {
			return
		}
		if kind == "pong" {
			p.own.Add(1)
			p.msgs.Add(1)
			continue
		}
		if kind != "message" {
			continue
		}
		now := time.Now().UnixNano()
		p.msgs.Add(1)
		switch {
		case bytes.Contains(payload, fleetTag):
			p.invs.Add(1)
			i := bytes.Index(payload, fleetTag) + len(fleetTag)
			j := bytes.IndexByte(payload[i:], '"')
			if sent, err := strconv.ParseInt(string(payload[i:i+max(j, 0)]), 10, 64); err == nil {
				p.hist.add(time.Duration(now - sent))
			}
		case bytes.Contains(payload, beatKey):
			if ch == p.beatChannel() || bytes.Contains(payload, origin) {
				p.own.Add(1)
			}
		}
	}
}

var errProto = errors.New("fleet: unexpected RESP")

// readPush reads one pub/sub push: an array whose first element names its
// kind ("message", "subscribe"), then channel and payload (or count).
func readPush(rd *bufio.Reader) (kind, channel string, payload []byte, err error) {
	line, err := rd.ReadSlice('\n')
	if err != nil {
		return "", "", nil, err
	}
	if len(line) < 3 || line[0] != '*' {
		return "", "", nil, errProto
	}
	n, err := strconv.Atoi(string(line[1 : len(line)-2]))
	if err != nil || n < 1 {
		return "", "", nil, errProto
	}
	var parts [3][]byte
	for i := range n {
		b, err := readElem(rd)
		if err != nil {
			return "", "", nil, err
		}
		if i < len(parts) {
			parts[i] = b
		}
	}
	return string(parts[0]), string(parts[1]), parts[2], nil
}

func readElem(rd *bufio.Reader) ([]byte, error) {
	line, err := rd.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 {
		return nil, errProto
	}
	switch line[0] {
	case ':', '+':
		return append([]byte(nil), line[1:len(line)-2]...), nil
	case '$':
		n, err := strconv.Atoi(string(line[1 : len(line)-2]))
		if err != nil || n < 0 {
			return nil, errProto
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(rd, b); err != nil {
			return nil, err
		}
		return b[:n], nil
	}
	return nil, errProto
}

// histogram counts latencies in 100 µs buckets up to 10 s.
type histogram struct {
	b    [100_001]atomic.Int64
	over atomic.Int64
}

const bucket = 100 * time.Microsecond

func (h *histogram) add(d time.Duration) {
	i := int(max(d, 0) / bucket)
	if i >= len(h.b) {
		h.over.Add(1)
		return
	}
	h.b[i].Add(1)
}

// quantile returns the q-quantile (bucket upper bound) and the count.
func (h *histogram) quantile(q float64) (time.Duration, int64) {
	var n int64
	for i := range h.b {
		n += h.b[i].Load()
	}
	n += h.over.Load()
	if n == 0 {
		return 0, 0
	}
	want := int64(q*float64(n) + 0.5)
	var c int64
	for i := range h.b {
		if c += h.b[i].Load(); c >= max(want, 1) {
			return time.Duration(i+1) * bucket, n
		}
	}
	return 10 * time.Second, n
}
