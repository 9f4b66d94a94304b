package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// Litestream's control socket speaks HTTP over a UNIX socket (v0.5.x):
// POST /sync with {"path", "wait", "timeout"} syncs the database's WAL and,
// with wait, uploads it to the replica before answering 200 with the
// database's and the replica's transaction ids; GET /list names every
// database with its status and last successful replica sync. Litestream is
// a separate program that may answer with more fields in a later release:
// answers are bounded, must be JSON objects carrying the fields read here
// with the right types, and other fields are ignored.
const (
	// litestreamSyncTimeout bounds one sync -wait (Litestream's own
	// timeout, in whole seconds); the HTTP request gets a second more.
	litestreamSyncTimeout = 10
	// litestreamAnswerBytes bounds an answer.
	litestreamAnswerBytes = 1 << 20
)

// errLitestream is every failure to talk to Litestream; it never carries
// Litestream's text (which names paths).
var errLitestream = errors.New("store: litestream control socket")

// litestream is a client of one Litestream control socket for one
// database path (the path Litestream's configuration names).
type litestream struct {
	hc   *http.Client
	path string
}

func newLitestream(socket, dbPath string, timeout time.Duration) *litestream {
	d := net.Dialer{Timeout: timeout}
	return &litestream{
		path: dbPath,
		hc: &http.Client{
			Timeout: timeout,
			Transport: &http.Transport{
				DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
					return d.DialContext(ctx, "unix", socket)
				},
				MaxIdleConns:        2,
				MaxIdleConnsPerHost: 2,
				IdleConnTimeout:     time.Minute,
			},
		},
	}
}

// call sends one request and hands a 200 answer's body to decode.
func (l *litestream) call(ctx context.Context, method, route string, body any, decode func([]byte) error) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("%w: %v", errLitestream, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://litestream"+route, rd)
	if err != nil {
		return fmt.Errorf("%w: %v", errLitestream, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := l.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%w: unreachable", errLitestream)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, litestreamAnswerBytes+1))
	switch {
	case err != nil:
		return fmt.Errorf("%w: answer cannot be read", errLitestream)
	case len(b) > litestreamAnswerBytes:
		return fmt.Errorf("%w: answer too large", errLitestream)
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("%w: %s answered status %d", errLitestream, route, resp.StatusCode)
	}
	return decode(b)
}

// syncWait asks Litestream to sync the database and wait for the replica
// (sync -wait).
func (l *litestream) syncWait(ctx context.Context) error {
	req := struct {
		Path    string `json:"path"`
		Wait    bool   `json:"wait"`
		Timeout int    `json:"timeout"`
	}{l.path, true, litestreamSyncTimeout}
	return l.call(ctx, http.MethodPost, "/sync", req, checkSynced)
}

// checkSynced accepts a /sync answer only if it says the replica holds
// the database's newest transaction.
func checkSynced(b []byte) error {
	var a struct {
		Status         *string `json:"status"`
		TXID           *uint64 `json:"txid"`
		ReplicatedTXID *uint64 `json:"replicated_txid"`
	}
	if err := json.Unmarshal(b, &a); err != nil {
		return fmt.Errorf("%w: /sync answer is not the expected JSON", errLitestream)
	}
	if a.Status == nil || a.TXID == nil || a.ReplicatedTXID == nil {
		return fmt.Errorf("%w: /sync answer lacks status or transaction ids", errLitestream)
	}
	if *a.Status != "synced" && *a.Status != "no_change" {
		return fmt.Errorf("%w: /sync did not reach the replica", errLitestream)
	}
	if *a.ReplicatedTXID < *a.TXID {
		return fmt.Errorf("%w: the replica is behind after /sync", errLitestream)
	}
	return nil
}

// ReplicaState is what Litestream says of the database's replica.
type ReplicaState struct {
	// Status is Litestream's word for the database ("replicating" when
	// its replica is being kept up to date, "open", "stopped").
	Status string
	// LastSync is the replica's last successful sync (Litestream syncs an
	// idle database on its interval too); zero if none yet.
	LastSync time.Time
}

// Lag is how long ago the replica last confirmed a sync at now. That sync
// uploaded the database as it was when it began, and Litestream reports
// only its end, so Lag is short of what a loss of the host at now would
// lose by that sync's upload time; ok is false when the replica has never
// synced.
func (r ReplicaState) Lag(now time.Time) (time.Duration, bool) {
	if r.LastSync.IsZero() {
		return 0, false
	}
	return max(now.Sub(r.LastSync), 0), true
}

// maxListedDatabases bounds the /list answer's databases read.
const maxListedDatabases = 4096

// state reads the database's entry in Litestream's /list.
func (l *litestream) state(ctx context.Context) (st ReplicaState, err error) {
	err = l.call(ctx, http.MethodGet, "/list", nil, func(b []byte) error {
		st, err = listedState(b, l.path)
		return err
	})
	return st, err
}

// listedState finds path's entry in a /list answer.
func listedState(b []byte, path string) (ReplicaState, error) {
	var a struct {
		Databases *[]struct {
			Path       *string    `json:"path"`
			Status     *string    `json:"status"`
			LastSyncAt *time.Time `json:"last_sync_at"`
		} `json:"databases"`
	}
	if err := json.Unmarshal(b, &a); err != nil {
		return ReplicaState{}, fmt.Errorf("%w: /list answer is not the expected JSON", errLitestream)
	}
	if a.Databases == nil || len(*a.Databases) > maxListedDatabases {
		return ReplicaState{}, fmt.Errorf("%w: /list answer has no database list", errLitestream)
	}
	for _, d := range *a.Databases {
		if d.Path == nil || d.Status == nil {
			return ReplicaState{}, fmt.Errorf("%w: /list answer lacks a path or status", errLitestream)
		}
		if *d.Path != path {
			continue
		}
		st := ReplicaState{Status: *d.Status}
		if d.LastSyncAt != nil {
			st.LastSync = d.LastSyncAt.UTC()
		}
		return st, nil
	}
	return ReplicaState{}, fmt.Errorf("%w: litestream does not replicate this database", errLitestream)
}

// ReadReplicaState asks the Litestream control socket socket about the
// file database dsn names, without opening it (forge doctor).
func ReadReplicaState(ctx context.Context, socket, dsn string) (ReplicaState, error) {
	loc, err := parseDSN(dsn)
	if err != nil {
		return ReplicaState{}, err
	}
	if loc.memory {
		return ReplicaState{}, invalid("a memory database has no replica")
	}
	l := newLitestream(socket, loc.path, 5*time.Second)
	defer l.hc.CloseIdleConnections()
	return l.state(ctx)
}

// ReplicaState reports Litestream's view of this store's replica (for
// metrics: ReplicaState.Lag is the replication lag); ok is false when
// replication is off.
func (s *Store) ReplicaState(ctx context.Context) (_ ReplicaState, ok bool, err error) {
	if s.repl == nil {
		return ReplicaState{}, false, nil
	}
	st, err := s.repl.state(ctx)
	return st, true, err
}
