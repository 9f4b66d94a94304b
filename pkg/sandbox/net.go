package sandbox

import (
	"net/netip"
	"slices"
	"sync"
)

// MaxConnect bounds a policy's Connect endpoints.
const MaxConnect = 8

// checkConnect validates a policy's Connect: at most MaxConnect
// endpoints, each a loopback address (IPv4 or IPv6, not v4-mapped, no
// zone) with a port other than 0, none twice.
func checkConnect(eps []netip.AddrPort) error {
	if len(eps) > MaxConnect {
		return errPolicy
	}
	for i, ep := range eps {
		a := ep.Addr()
		if !a.IsLoopback() || a.Is4In6() || a.Zone() != "" || ep.Port() == 0 || slices.Contains(eps[:i], ep) {
			return errPolicy
		}
	}
	return nil
}

// connectPorts are the distinct ports of eps, in order.
func connectPorts(eps []netip.AddrPort) []uint16 {
	var ports []uint16
	for _, ep := range eps {
		if !slices.Contains(ports, ep.Port()) {
			ports = append(ports, ep.Port())
		}
	}
	return ports
}

// allowsConnect reports whether a connection to ep is one of eps (a
// v4-mapped IPv6 address counts as its IPv4 address, a zone is ignored).
func allowsConnect(eps []netip.AddrPort, ep netip.AddrPort) bool {
	ep = netip.AddrPortFrom(ep.Addr().Unmap().WithZone(""), ep.Port())
	return slices.Contains(eps, ep)
}

// MaxRefusedKept bounds how many distinct refused destinations a
// Refusals keeps; every refusal is counted.
const MaxRefusedKept = 32

// Refusals collects the connections a sandbox refused to the programs of
// one attempt: a count, and the first MaxRefusedKept distinct
// destinations (host and port, nothing of what would have been sent).
// Its zero value is empty; it is safe for concurrent use.
type Refusals struct {
	mu    sync.Mutex
	count int64
	kept  []Refused
}

// Refused is one refused destination and how often it was refused.
type Refused struct {
	Host  string // an IP address, or the name a CONNECT asked for
	Port  uint16
	Count int64
}

// Add counts one refusal of host:port. A nil Refusals counts nothing.
func (r *Refusals) Add(host string, port uint16) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count++
	for i := range r.kept {
		if r.kept[i].Host == host && r.kept[i].Port == port {
			r.kept[i].Count++
			return
		}
	}
	if len(r.kept) < MaxRefusedKept {
		r.kept = append(r.kept, Refused{Host: host, Port: port, Count: 1})
	}
}

// Snapshot returns the total count and the destinations kept so far.
func (r *Refusals) Snapshot() (int64, []Refused) {
	if r == nil {
		return 0, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count, slices.Clone(r.kept)
}
