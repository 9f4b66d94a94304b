package install

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/0k-lab/agent-forge/pkg/ident"
	"github.com/0k-lab/agent-forge/pkg/strictjson"
)

// Proof deadlines: how long the Gate may take to answer /readyz and the
// Worker to connect after its start.
const (
	ReadyTimeout   = 30 * time.Second
	ConnectTimeout = 30 * time.Second
	pollEvery      = 200 * time.Millisecond
)

// OwnerToken reads the owner token from the Gate's environment file.
func OwnerToken(f FS) (string, error) {
	b, err := f.ReadFile(GateEnv, 4096)
	if err != nil {
		return "", errors.New("the Gate environment file cannot be read")
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, OwnerTokenEnv+"="); ok && ident.ValidToken(v) {
			return v, nil
		}
	}
	return "", errors.New("the Gate environment file holds no owner token")
}

// GateClient talks to the installed Gate on its loopback address. Every
// connection is proved to reach the Gate unit before a byte is written:
// the server side of the new TCP connection must be a socket open in the
// unit's main process (any local account can bind the port while the Gate
// is stopped, and would otherwise receive the owner token and answer the
// proofs).
type GateClient struct {
	base  string
	token string
	http  *http.Client
}

// ErrNotTheGate is a connection whose server side is not the Gate unit's
// main process; nothing was sent on it.
var ErrNotTheGate = errors.New("the process answering on the Gate's address is not the Gate unit's main process (nothing was sent)")

// NewGateClient returns a client for the Gate unit of s listening on
// listen.
func NewGateClient(listen, token string, s Services) *GateClient {
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		d := net.Dialer{Timeout: 5 * time.Second}
		conn, err := d.DialContext(ctx, "tcp4", listen)
		if err != nil {
			return nil, err
		}
		pid, err := s.MainPID(ctx, GateUnit)
		if err == nil && pid > 0 {
			err = servedBy(ctx, conn, pid)
		} else if err == nil {
			err = ErrNotTheGate
		}
		if err != nil {
			conn.Close()
			return nil, ErrNotTheGate
		}
		return conn, nil
	}
	return &GateClient{base: "http://" + listen, token: token, http: &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true, DialContext: dial},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return errors.New("redirects are refused")
		},
	}}
}

func (c *GateClient) get(ctx context.Context, path string, auth bool) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return 0, nil, errors.New("bad request")
	}
	if auth {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if errors.Is(err, ErrNotTheGate) {
		return 0, nil, ErrNotTheGate
	}
	if err != nil {
		return 0, nil, errors.New("the Gate does not answer")
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, nil, errors.New("the Gate's answer was cut off")
	}
	return resp.StatusCode, b, nil
}

// Release is the Gate's GET /v1/version answer.
type Release struct {
	Version       string `json:"version"`
	Commit        string `json:"commit"`
	SchemaVersion int    `json:"schema_version"`
}

// Release asks the Gate for its release identity (owner token).
func (c *GateClient) Release(ctx context.Context) (Release, error) {
	var r Release
	code, b, err := c.get(ctx, "/v1/version", true)
	if err != nil {
		return r, err
	}
	if code != http.StatusOK {
		return r, errors.New("the Gate refused the owner version request")
	}
	if err := strictjson.Decode(b, &r); err != nil {
		return r, errors.New("the Gate's version answer is malformed")
	}
	return r, nil
}

type lanesPage struct {
	Lanes []struct {
		Lane           string `json:"lane"`
		WorkerID       string `json:"worker_id"`
		Pool           string `json:"pool"`
		Connected      bool   `json:"connected"`
		ConnectedAt    string `json:"connected_at"`
		DisconnectedAt string `json:"disconnected_at"`
		JobID          string `json:"job_id"`
		AttemptID      string `json:"attempt_id"`
	} `json:"lanes"`
	NextCursor string `json:"next_cursor"`
	AsOf       string `json:"as_of"`
}

// WorkerConnected reports whether a lane of the installed Worker is
// connected, as the Gate sees it (owner token).
func (c *GateClient) WorkerConnected(ctx context.Context) (bool, error) {
	code, b, err := c.get(ctx, "/v1/debug/workers?limit=100", true)
	if err != nil {
		return false, err
	}
	if code != http.StatusOK {
		return false, errors.New("the Gate refused the owner lanes request")
	}
	var p lanesPage
	if err := strictjson.Decode(b, &p); err != nil {
		return false, errors.New("the Gate's lanes answer is malformed")
	}
	for _, l := range p.Lanes {
		if l.WorkerID == WorkerID && l.Connected {
			return true, nil
		}
	}
	return false, nil
}

// until polls cond until it is true or the host clock passes timeout.
func until(ctx context.Context, h Host, timeout time.Duration, cond func() bool) bool {
	deadline := h.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if !h.Now().Before(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(pollEvery):
		}
	}
}

// proveGate waits for /readyz and checks the running Gate's identity.
func proveGate(ctx context.Context, h Host, c *GateClient, version, commit string, schema int) error {
	var impostor bool
	if !until(ctx, h, ReadyTimeout, func() bool {
		code, _, err := c.get(ctx, "/readyz", false)
		impostor = errors.Is(err, ErrNotTheGate)
		return err == nil && code == http.StatusOK
	}) {
		if impostor {
			return errors.New("the Gate did not become ready: " + ErrNotTheGate.Error())
		}
		return errors.New("the Gate did not become ready")
	}
	r, err := c.Release(ctx)
	if err != nil {
		return err
	}
	if r.Version != version || r.Commit != commit || r.SchemaVersion != schema {
		return errors.New("the running Gate is not the expected release")
	}
	return nil
}

// proveWorker waits until the Gate reports the Worker connected.
func proveWorker(ctx context.Context, h Host, c *GateClient) error {
	var lastErr error
	ok := until(ctx, h, ConnectTimeout, func() bool {
		up, err := c.WorkerConnected(ctx)
		lastErr = err
		return up
	})
	if !ok {
		if lastErr != nil {
			return lastErr
		}
		return errors.New("the Worker did not connect to the Gate")
	}
	return nil
}
