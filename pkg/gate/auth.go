package gate

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// principal is who presented a token: the owner, a Worker (by index in
// Config.Workers), or nobody.
type principal struct {
	owner  bool
	worker int // index in Config.Workers, or -1
}

var nobody = principal{worker: -1}

// identify maps the Authorization header to a principal. Every known
// digest is compared in constant time, whatever matched earlier.
func (s *Secrets) identify(r *http.Request) principal {
	h := r.Header.Get("Authorization")
	const scheme = "Bearer "
	if len(r.Header.Values("Authorization")) != 1 || len(h) <= len(scheme) || !strings.EqualFold(h[:len(scheme)], scheme) {
		return nobody
	}
	tok := h[len(scheme):]
	if len(tok) > MaxTokenBytes {
		return nobody
	}
	d := sha256.Sum256([]byte(tok))
	p := nobody
	if subtle.ConstantTimeCompare(d[:], s.owner[:]) == 1 {
		p.owner = true
	}
	for i := range s.workers {
		if subtle.ConstantTimeCompare(d[:], s.workers[i][:]) == 1 {
			p.worker = i
		}
	}
	return p
}
