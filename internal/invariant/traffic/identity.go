package traffic

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"
)

// Identity is one client: its own source address and credentials.
type Identity struct {
	Name, Addr, Tenant string
	Client             *http.Client
	Proxied            *http.Client // absolute-form: the replica as its proxy
}

func newIdentities() []*Identity {
	var ids []*Identity
	for i, n := range []string{"alice", "bob", "carol", "dave"} {
		addr := fmt.Sprintf("127.0.0.%d", i+2)
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(addr)}, Timeout: 5 * time.Second}
		tenants := []string{"acme", "globex", "initech", ""}
		newClient := func(proxy func(*http.Request) (*url.URL, error)) *http.Client {
			return &http.Client{
				Timeout: 20 * time.Second,
				Transport: &http.Transport{
					DialContext:           d.DialContext,
					Proxy:                 proxy,
					DisableCompression:    true, // the checks see the coding as sent
					MaxIdleConnsPerHost:   32,
					ExpectContinueTimeout: 5 * time.Second,
				},
				CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
			}
		}
		ids = append(ids, &Identity{Name: n, Addr: addr, Tenant: tenants[i], Client: newClient(nil), Proxied: newClient(viaProxy)})
	}
	return ids
}
