package origin

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// The upgrade row's endpoint: any request carrying TunnelHeader (a path
// under /ws/ that no route takes, or a route's path reached by
// pass-through) is a WebSocket-like app's, which answers by the mode the
// client drew (TunnelModeHeader), as an app that misbehaves would:
//
//   - echo: 101 when asked (Upgrade: websocket), then each line that
//     carries the tunnel's own id is sent back; when not asked, 200 with
//     NotUpgraded;
//   - any: 101 whether asked or not (RFC 9110 §15.2.2 forbids it
//     unasked), then as echo;
//   - refuse: 200 with Refused as its body (an app that declines);
//   - close: 101, then the connection closed at once;
//   - hangup: the connection closed with no answer;
//   - silent: 101, then nothing, either way, until the sidecar closes
//     the connection (tunnel_idle_timeout).
//
// A line of a tunnel carrying another tunnel's id, and an upgrade request
// that carries a forged forwarding value (ForgedAddr, ForgedHost, an
// underscore spelling) or an X-Forwarded-For other than its client's
// address, are recorded as faults (TakeTunnelFaults).

// TunnelHeader names an upgrade request's tunnel: "<id> <client address>".
// TunnelModeHeader is how the origin answers it (the modes above).
const (
	TunnelHeader     = "X-Tunnel"
	TunnelModeHeader = "X-Tunnel-Mode"
)

// ForgedAddr and ForgedHost are the forwarding values the clients forge;
// none may reach the origin.
const (
	ForgedAddr = "6.6.6.6"
	ForgedHost = "forged.invariant"
)

// Refused and NotUpgraded are the bodies of the tunnel endpoint's 200s.
func Refused(id string) string     { return "refused " + id }
func NotUpgraded(id string) string { return "not upgraded " + id }

// tunnelGuard bounds a tunnel on the origin's side: far past any idle
// bound the replicas set, so a tunnel still open then was never cut.
const tunnelGuard = 30 * time.Second

// tunnelState is what the origin saw of one tunnel id.
type tunnelState struct {
	calls int
	ended chan struct{} // closed when a switched connection ended
}

// TunnelCalls is the number of requests the origin received for tunnel
// id, and ended is closed once the last of them was over (a switched
// connection ended); it stays open while none came.
func (o *Origin) TunnelCalls(id string) (calls int, ended <-chan struct{}) {
	o.mu.Lock()
	defer o.mu.Unlock()
	t := o.tunnelLocked(id)
	return t.calls, t.ended
}

// TakeTunnelFaults returns the tunnel faults recorded since the last call.
func (o *Origin) TakeTunnelFaults() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	f := o.tunnelFaults
	o.tunnelFaults = nil
	return f
}

// tunnelLocked is id's state; o.mu held.
func (o *Origin) tunnelLocked(id string) *tunnelState {
	if o.tunnels == nil {
		o.tunnels = map[string]*tunnelState{}
	}
	t := o.tunnels[id]
	if t == nil {
		t = &tunnelState{ended: make(chan struct{})}
		o.tunnels[id] = t
	}
	return t
}

// endTunnel marks t's call over (its connection, if switched, ended).
func (o *Origin) endTunnel(t *tunnelState) {
	o.mu.Lock()
	defer o.mu.Unlock()
	select {
	case <-t.ended:
	default:
		close(t.ended)
	}
}

func (o *Origin) tunnelFault(format string, a ...any) {
	o.mu.Lock()
	o.tunnelFaults = append(o.tunnelFaults, fmt.Sprintf(format, a...))
	o.mu.Unlock()
}

// tunnel answers r if it is the upgrade row's (it carries TunnelHeader),
// reporting whether it did.
func (o *Origin) tunnel(w http.ResponseWriter, r *http.Request) bool {
	v := r.Header.Get(TunnelHeader)
	if v == "" {
		return false
	}
	id, addr, _ := strings.Cut(v, " ")
	o.mu.Lock()
	t := o.tunnelLocked(id)
	t.calls++
	o.mu.Unlock()
	defer o.endTunnel(t)
	what := r.Method + " " + r.URL.RequestURI() + " (tunnel " + id + ")"
	if got := r.Header.Values("X-Forwarded-For"); len(got) != 1 || got[0] != addr {
		o.tunnelFault("%s: X-Forwarded-For %q, the client is %s", what, got, addr)
	}
	for k, vs := range r.Header {
		for _, s := range vs {
			if l := strings.ToLower(s); strings.Contains(l, ForgedAddr) || strings.Contains(l, ForgedHost) {
				o.tunnelFault("%s: carried the client's forged %s: %q", what, k, s)
			}
		}
	}
	if k := Underscored(r.Header); k != "" {
		o.tunnelFault("%s: carried the underscore spelling %s", what, k)
	}
	asked := strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
	mode := r.Header.Get(TunnelModeHeader)
	switch {
	case mode == "refuse":
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, Refused(id))
		return true
	case mode == "echo" && !asked:
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, NotUpgraded(id))
		return true
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return true
	}
	defer conn.Close()
	if mode == "hangup" {
		return true
	}
	_ = conn.SetDeadline(time.Now().Add(tunnelGuard))
	_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
	if brw.Flush() != nil || mode == "close" {
		return true
	}
	if mode == "silent" {
		_, _ = io.Copy(io.Discard, brw.Reader) // until the sidecar closes it
		return true
	}
	o.echo(conn, brw.Reader, id, what)
	return true
}

// echo sends back each line of tunnel id that carries its id, until the
// connection ends; a line of another tunnel is a fault (and answered "x").
func (o *Origin) echo(w io.Writer, br *bufio.Reader, id, what string) {
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return
		}
		if !strings.HasPrefix(line, id+":") {
			o.tunnelFault("%s: received %q, not its own bytes", what, line)
			line = "x\n"
		}
		if _, err := io.WriteString(w, line); err != nil {
			return
		}
	}
}
