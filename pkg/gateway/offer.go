package gateway

import (
	"errors"
	"sort"
	"strings"

	"github.com/0k-lab/agent-forge/pkg/ident"
)

// The offer is what an attempt's plugin is told of the providers (the
// Worker passes it as FORGE_GATEWAY_PROVIDERS beside the gateway's URL and
// the credential): "ID=KIND" for every provider, sorted by id, joined by
// ",". It names ids and kinds only, never an upstream or a key, so an
// agent plugin can pick the provider its agent speaks to (by the
// profile's provider id, or the only one of its kind) and build its base
// URL with ProviderURL.

// Offered is one provider of an offer.
type Offered struct {
	ID   string
	Kind Kind
}

// MaxOfferBytes bounds an offer: MaxProviders entries of an id, "=", a
// kind and ",".
const MaxOfferBytes = MaxProviders * (maxProviderIDSize + 32)

// Offer returns the gateway's offer.
func (g *Gateway) Offer() string {
	ps := make([]Offered, 0, len(g.providers))
	for _, u := range g.providers {
		ps = append(ps, Offered{ID: u.ID, Kind: u.Kind})
	}
	return FormatOffer(ps)
}

// Offer is the offer of the grant's gateway.
func (gr *Grant) Offer() string { return gr.gw.Offer() }

// FormatOffer encodes ps (valid ids and kinds) as an offer.
func FormatOffer(ps []Offered) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = p.ID + "=" + string(p.Kind)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// errOffer is every refused offer: it names no part of it.
var errOffer = errors.New("gateway: the provider offer is not ID=KIND pairs of known kinds, unique ids, at most 16, joined by commas")

// ParseOffer decodes an offer: 1 to MaxProviders "ID=KIND" pairs joined
// by ",", each id a safe id of at most 64 bytes (pkg/ident) used once, each
// kind one of Kinds; at most MaxOfferBytes in all.
func ParseOffer(s string) ([]Offered, error) {
	if s == "" || len(s) > MaxOfferBytes {
		return nil, errOffer
	}
	parts := strings.Split(s, ",")
	if len(parts) > MaxProviders {
		return nil, errOffer
	}
	out := make([]Offered, 0, len(parts))
	for _, part := range parts {
		id, kind, ok := strings.Cut(part, "=")
		if !ok || !ident.ValidID(id) || len(id) > maxProviderIDSize || !knownKind(Kind(kind)) {
			return nil, errOffer
		}
		for _, prev := range out {
			if prev.ID == id {
				return nil, errOffer
			}
		}
		out = append(out, Offered{ID: id, Kind: Kind(kind)})
	}
	return out, nil
}

func knownKind(k Kind) bool {
	for _, known := range Kinds {
		if k == known {
			return true
		}
	}
	return false
}
