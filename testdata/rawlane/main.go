// Command rawlane is a test client that speaks forge-wire/v1 by hand, for
// scripts/recovery-e2e.sh, scripts/lane-liveness-e2e.sh and
// scripts/public-source-e2e.sh. It is not a shipped binary (the binary
// set is fixed under cmd/); the scripts build it into their temp dir.
//
// Usage:
//
//	rawlane -gate ws://HOST:PORT -worker ID -token-env NAME abandon
//	rawlane -gate ws://HOST:PORT -worker ID -token-env NAME late JOB ATTEMPT
//	rawlane -gate ws://HOST:PORT -worker ID -token-env NAME badresult N
//	rawlane -gate ws://HOST:PORT -worker ID -token-env NAME candidate REPO PLUGIN PACK COMMIT TREE
//
// abandon connects as slot 0, prints {"event":"welcome",...}, waits for one
// lease, prints {"event":"lease",...} and then says nothing more (no
// heartbeat, no result) until the connection ends; it exits 0 then.
//
// late connects as slot 0 and, for the given job and attempt, sends a
// successful result and then one evidence batch, printing Gate's answer to
// each as {"event":"result"|"evidence","reply":"ack"|"reject","code":...}.
//
// badresult connects as slot 0, waits for one lease (printed like abandon's)
// and for one line on stdin, then fails it with a well-formed failure code
// that is not in the failure table ("no_such_failure", retryable) and
// prints Gate's answer as {"event":"bad_result","reply":...,"code":...,
// "t_ms":...}. It then answers the next N leases with a successful result
// ("LIVE"), printing each as a lease event with "t_ms" and its answer as a
// result event, and exits 0. It never says idle: a cancel is printed as
// {"event":"cancel",...} and otherwise ignored, as by a Worker build that
// ignores cancels; one that leaves the lane stranded then never gets its
// next lease (exit 1 after 30 s without one).
//
// candidate acts as a compromised Worker host: it connects as slot 0 with
// plugin PLUGIN and repository REPO, waits for one lease (printed like
// abandon's, then {"event":"base","base_sha":...}) and for one line on
// stdin, and uploads, with its Worker token, a
// candidate bundle it writes by hand: the lease's base as the one
// prerequisite, the attempt's candidate ref at COMMIT (announced with
// TREE), and the pack in the file PACK, whatever it holds. It prints the
// Gate's answer as {"event":"candidate","status":N,"body":...} and fails
// the attempt (candidate_refused), printing that answer as a result event.
//
// Output is JSON lines on stdout; t_ms is the client's Unix time in
// milliseconds. Exit codes: 0 done, 1 connection or
// protocol failure, 2 usage.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/0k-lab/agent-forge/pkg/gitx"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	switch {
	case err == nil:
		os.Exit(0)
	case errors.Is(err, errUsage):
		fmt.Fprintln(os.Stderr, "rawlane: error:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "rawlane: error:", err)
		os.Exit(1)
	}
}

var errUsage = errors.New("usage: rawlane -gate URL -worker ID -token-env NAME abandon | late JOB ATTEMPT | badresult N | candidate REPO PLUGIN PACK COMMIT TREE")

func run(ctx context.Context, args []string, stdin io.Reader, stdout, _ io.Writer) error {
	fs := flag.NewFlagSet("rawlane", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	gate := fs.String("gate", "", "Gate ws:// URL")
	workerID := fs.String("worker", "", "worker id")
	tokenEnv := fs.String("token-env", "", "variable holding the worker token")
	if err := fs.Parse(args); err != nil || *gate == "" || *workerID == "" || *tokenEnv == "" || fs.NArg() < 1 {
		return errUsage
	}
	mode, rest := fs.Arg(0), fs.Args()[1:]
	want := map[string]int{"abandon": 0, "late": 2, "badresult": 1, "candidate": 5}
	if n, ok := want[mode]; !ok || len(rest) != n {
		return errUsage
	}
	leases := 0
	if mode == "badresult" {
		n, err := strconv.Atoi(rest[0])
		if err != nil || n < 0 || n > 100 {
			return errUsage
		}
		leases = n
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	conn, err := wire.Dial(dctx, *gate, os.Getenv(*tokenEnv))
	cancel()
	if err != nil {
		return err
	}
	defer conn.Close()
	go func() { <-ctx.Done(); conn.Close() }()
	out := json.NewEncoder(stdout)
	hello := &wire.Hello{Protocol: wire.Protocol, WorkerID: *workerID, Slot: 0, Plugins: []string{"reference"}, Repositories: []string{}}
	if mode == "candidate" {
		hello.Plugins, hello.Repositories = []string{rest[1]}, []string{rest[0]}
	}
	if err := conn.Send(wire.Envelope{Type: wire.TypeHello, Hello: hello}); err != nil {
		return err
	}
	e, err := conn.Receive()
	if err != nil || e.Type != wire.TypeWelcome {
		return errors.New("no welcome")
	}
	if err := out.Encode(map[string]any{"event": "welcome", "lane": e.Welcome.Lane}); err != nil {
		return err
	}
	switch mode {
	case "abandon":
		return abandon(conn, out)
	case "badresult":
		return badResult(conn, out, stdin, leases)
	case "candidate":
		return candidate(conn, out, stdin, *gate, os.Getenv(*tokenEnv), e.Welcome, rest[2], rest[3], rest[4])
	}
	return late(conn, out, rest[0], rest[1])
}

func abandon(conn *wire.Conn, out *json.Encoder) error {
	for {
		e, err := conn.Receive()
		if err != nil {
			return nil // the connection ended: the point of abandoning
		}
		if e.Type != wire.TypeLease {
			continue
		}
		l := e.Lease
		if err := out.Encode(map[string]any{"event": "lease", "job_id": l.JobID, "attempt_id": l.AttemptID,
			"ordinal": l.Ordinal, "deadline_at": l.DeadlineAt}); err != nil {
			return err
		}
	}
}

func late(conn *wire.Conn, out *json.Encoder, job, attempt string) error {
	output := "FORGED LATE RESULT"
	reqs := []wire.Envelope{
		{Type: wire.TypeResult, Seq: 1, Result: &wire.Result{JobID: job, AttemptID: attempt, Outcome: wire.OutcomeSucceeded, Output: &output}},
		{Type: wire.TypeEvidence, Seq: 2, Evidence: &wire.Evidence{JobID: job, AttemptID: attempt, Batch: 1,
			Records: []json.RawMessage{json.RawMessage(`{"phase":"plugin","reason":"late"}`)}}},
	}
	for _, r := range reqs {
		if err := conn.SendDeadline(r, time.Now().Add(10*time.Second)); err != nil {
			return err
		}
		if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
			return err
		}
		e, err := conn.Receive()
		if err != nil {
			return err
		}
		if e.Seq != r.Seq {
			return errors.New("reply out of order")
		}
		rec := map[string]any{"event": string(r.Type), "reply": string(e.Type)}
		if e.Type == wire.TypeReject {
			rec["code"] = string(e.Reject.Code)
		}
		if err := out.Encode(rec); err != nil {
			return err
		}
	}
	return nil
}

func nowMS() int64 { return time.Now().UnixMilli() }

// nextLease waits (30 s at most) for the next lease, printing and
// skipping cancels.
func nextLease(conn *wire.Conn, out *json.Encoder) (*wire.Lease, error) {
	if err := conn.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
		return nil, err
	}
	for {
		e, err := conn.Receive()
		if err != nil {
			return nil, errors.New("no lease")
		}
		switch e.Type {
		case wire.TypeLease:
			l := e.Lease
			return l, out.Encode(map[string]any{"event": "lease", "job_id": l.JobID, "attempt_id": l.AttemptID,
				"ordinal": l.Ordinal, "deadline_at": l.DeadlineAt, "t_ms": nowMS()})
		case wire.TypeCancel:
			if err := out.Encode(map[string]any{"event": "cancel", "job_id": e.Cancel.JobID,
				"attempt_id": e.Cancel.AttemptID, "t_ms": nowMS()}); err != nil {
				return nil, err
			}
		default:
			return nil, errors.New("unexpected message")
		}
	}
}

// request sends r and prints Gate's answer to it as event.
func request(conn *wire.Conn, out *json.Encoder, event string, r wire.Envelope) error {
	if err := conn.SendDeadline(r, time.Now().Add(10*time.Second)); err != nil {
		return err
	}
	if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return err
	}
	e, err := conn.Receive()
	if err != nil {
		return err
	}
	if e.Seq != r.Seq || (e.Type != wire.TypeAck && e.Type != wire.TypeReject) {
		return errors.New("reply out of order")
	}
	rec := map[string]any{"event": event, "reply": string(e.Type), "t_ms": nowMS()}
	if e.Type == wire.TypeReject {
		rec["code"] = string(e.Reject.Code)
	}
	return out.Encode(rec)
}

func badResult(conn *wire.Conn, out *json.Encoder, stdin io.Reader, n int) error {
	l, err := nextLease(conn, out)
	if err != nil {
		return err
	}
	if _, err := bufio.NewReader(stdin).ReadString('\n'); err != nil {
		return errors.New("no go line on stdin")
	}
	bad := wire.Envelope{Type: wire.TypeResult, Seq: 1, Result: &wire.Result{JobID: l.JobID, AttemptID: l.AttemptID,
		Outcome: wire.OutcomeFailed, Disposition: wire.DispositionRetryable, FailureCode: "no_such_failure"}}
	if err := request(conn, out, "bad_result", bad); err != nil {
		return err
	}
	output := "LIVE"
	for i := 0; i < n; i++ {
		l, err := nextLease(conn, out)
		if err != nil {
			return err
		}
		ok := wire.Envelope{Type: wire.TypeResult, Seq: uint64(2 + i), Result: &wire.Result{JobID: l.JobID, AttemptID: l.AttemptID,
			Outcome: wire.OutcomeSucceeded, Output: &output}}
		if err := request(conn, out, "result", ok); err != nil {
			return err
		}
	}
	return nil
}

// candidate uploads a hand-made candidate bundle for the next lease and
// fails the attempt.
func candidate(conn *wire.Conn, out *json.Encoder, stdin io.Reader, gate, token string, w *wire.Welcome, packFile, commit, tree string) error {
	pack, err := os.ReadFile(packFile)
	if err != nil {
		return err
	}
	l, err := nextLease(conn, out)
	if err != nil {
		return err
	}
	if err := out.Encode(map[string]any{"event": "base", "base_sha": l.BaseSHA}); err != nil {
		return err
	}
	if _, err := bufio.NewReader(stdin).ReadString('\n'); err != nil {
		return errors.New("no go line on stdin")
	}
	bundle := append(gitx.FormatBundleHeader(gitx.BundleHeader{
		Prerequisites: []gitx.BundlePrerequisite{{SHA: l.BaseSHA}},
		Refs:          []gitx.BundleRef{{SHA: commit, Name: wire.CandidateRef(l.JobID, l.AttemptID)}},
	}), pack...)
	q := wire.CandidateRequest{AttemptBinding: wire.AttemptBinding{Lane: w.Lane, Generation: w.Generation, JobID: l.JobID, AttemptID: l.AttemptID},
		Candidate: commit, Tree: tree}.Query()
	req, err := http.NewRequest(http.MethodPut, "http"+strings.TrimPrefix(gate, "ws")+wire.CandidatePath+"?"+q, bytes.NewReader(bundle))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", wire.BundleContentType)
	client := &http.Client{Timeout: 60 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if err != nil {
		return err
	}
	rec := map[string]any{"event": "candidate", "status": resp.StatusCode, "body": string(body)}
	if json.Valid(body) {
		rec["body"] = json.RawMessage(body)
	}
	if err := out.Encode(rec); err != nil {
		return err
	}
	d, _ := wire.DispositionOf(wire.FailureCandidateRefused)
	return request(conn, out, "result", wire.Envelope{Type: wire.TypeResult, Seq: 1, Result: &wire.Result{JobID: l.JobID, AttemptID: l.AttemptID,
		Outcome: wire.OutcomeFailed, Disposition: d, FailureCode: wire.FailureCandidateRefused}})
}
