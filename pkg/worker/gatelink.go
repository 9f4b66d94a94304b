package worker

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/0k-lab/agent-forge/pkg/wire"
)

// GateLink is one attempt's authenticated HTTP channel to the Gate for
// repository bundles (DECISIONS 15): the base of a public-source lease
// comes down as a bundle (wire.SourcePath), the candidate goes up as one
// (wire.CandidatePath). It uses the lane's Worker token and names the
// lane's current lease (lane, generation, job, attempt); the Gate serves
// nothing else. The token is sent only to the configured Gate origin,
// never through a proxy, and redirects are not followed.
type GateLink struct {
	origin string // http:// or https:// host[:port] of gate_url
	token  string
	client *http.Client
	bind   wire.AttemptBinding
}

// LinkError is a bundle request the Gate refused (Status and its error
// code, a fixed word) or that never got an answer (Status 0).
type LinkError struct {
	Status int
	Code   string
}

func (e *LinkError) Error() string {
	if e.Status == 0 {
		return "gate link: no answer"
	}
	return "gate link: " + strconv.Itoa(e.Status) + " " + e.Code
}

// newHTTPClient is the default client of GateLinks: no proxy (like the
// lane's WebSocket), no redirects, no cookies.
func newHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	return &http.Client{Transport: t, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// newGateLink builds the link of one attempt on a lane.
func newGateLink(gateURL *url.URL, token string, client *http.Client, b wire.AttemptBinding) *GateLink {
	scheme := "http"
	if gateURL.Scheme == "wss" {
		scheme = "https"
	}
	return &GateLink{origin: scheme + "://" + gateURL.Host, token: token, client: client, bind: b}
}

// FetchBase asks for want (the lease's base) minus haves and writes the
// bundle to a new file at dst, at most limit bytes. It returns the bytes
// written. The request ends when idle passes without a byte from the
// Gate (its answer or the next bytes of the bundle), however long the
// whole download takes while bytes flow; ctx bounds it in all.
func (l *GateLink) FetchBase(ctx context.Context, want string, haves []string, dst string, limit int64, idle time.Duration) (int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stall := time.AfterFunc(idle, cancel)
	defer stall.Stop()
	q := wire.SourceRequest{AttemptBinding: l.bind, Want: want, Haves: haves}.Query()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, l.origin+wire.SourcePath+"?"+q, nil)
	if err != nil {
		return 0, &LinkError{}
	}
	req.Header.Set("Authorization", "Bearer "+l.token)
	resp, err := l.client.Do(req)
	if err != nil {
		return 0, &LinkError{}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, refusal(resp)
	}
	if ct := resp.Header.Get("Content-Type"); ct != wire.BundleContentType || resp.ContentLength > limit {
		return 0, &LinkError{Status: resp.StatusCode, Code: "unexpected_body"}
	}
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, err
	}
	stall.Reset(idle)
	n, err := io.Copy(f, io.LimitReader(progress{resp.Body, func() { stall.Reset(idle) }}, limit+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, &LinkError{}
	}
	if n > limit || (resp.ContentLength >= 0 && n != resp.ContentLength) {
		return n, &LinkError{Status: resp.StatusCode, Code: "unexpected_body"}
	}
	return n, nil
}

// progress calls moved after each read that returned bytes.
type progress struct {
	r     io.Reader
	moved func()
}

func (p progress) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.moved()
	}
	return n, err
}

// PutCandidate uploads the bundle at path as the attempt's candidate
// (commit candidate with tree tree). nil means the Gate stored it.
func (l *GateLink) PutCandidate(ctx context.Context, candidate, tree, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	q := wire.CandidateRequest{AttemptBinding: l.bind, Candidate: candidate, Tree: tree}.Query()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, l.origin+wire.CandidatePath+"?"+q, f)
	if err != nil {
		return &LinkError{}
	}
	req.ContentLength = fi.Size()
	req.Header.Set("Authorization", "Bearer "+l.token)
	req.Header.Set("Content-Type", wire.BundleContentType)
	resp, err := l.client.Do(req)
	if err != nil {
		return &LinkError{}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return refusal(resp)
	}
	return nil
}

// maxErrorBody bounds an error answer the link reads.
const maxErrorBody = 4096

// refusal reads a refusal's error code (a fixed word of the Gate's API).
func refusal(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	code := ""
	const key = `"code":"`
	if i := bytes.Index(b, []byte(key)); i >= 0 {
		rest := b[i+len(key):]
		for j := 0; j < len(rest) && j < 64; j++ {
			c := rest[j]
			if c == '"' {
				code = string(rest[:j])
				break
			}
			if !(c >= 'a' && c <= 'z' || c == '_') {
				break
			}
		}
	}
	return &LinkError{Status: resp.StatusCode, Code: code}
}

// linkStatus is the HTTP status of a LinkError (0 otherwise).
func linkStatus(err error) int {
	var le *LinkError
	if errors.As(err, &le) {
		return le.Status
	}
	return 0
}
