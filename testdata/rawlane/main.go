// Command rawlane is a test client that speaks forge-wire/v1 by hand, for
// scripts/recovery-e2e.sh. It is not a shipped binary (the binary set is
// fixed under cmd/); the script builds it into its temp dir.
//
// Usage:
//
//	rawlane -gate ws://HOST:PORT -worker ID -token-env NAME abandon
//	rawlane -gate ws://HOST:PORT -worker ID -token-env NAME late JOB ATTEMPT
//
// abandon connects as slot 0, prints {"event":"welcome",...}, waits for one
// lease, prints {"event":"lease",...} and then says nothing more (no
// heartbeat, no result) until the connection ends; it exits 0 then.
//
// late connects as slot 0 and, for the given job and attempt, sends a
// successful result and then one evidence batch, printing Gate's answer to
// each as {"event":"result"|"evidence","reply":"ack"|"reject","code":...}.
//
// Output is JSON lines on stdout. Exit codes: 0 done, 1 connection or
// protocol failure, 2 usage.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/0k-lab/agent-forge/pkg/wire"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
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

var errUsage = errors.New("usage: rawlane -gate URL -worker ID -token-env NAME abandon | late JOB ATTEMPT")

func run(ctx context.Context, args []string, stdout, _ io.Writer) error {
	fs := flag.NewFlagSet("rawlane", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	gate := fs.String("gate", "", "Gate ws:// URL")
	workerID := fs.String("worker", "", "worker id")
	tokenEnv := fs.String("token-env", "", "variable holding the worker token")
	if err := fs.Parse(args); err != nil || *gate == "" || *workerID == "" || *tokenEnv == "" || fs.NArg() < 1 {
		return errUsage
	}
	mode, rest := fs.Arg(0), fs.Args()[1:]
	if (mode == "abandon" && len(rest) != 0) || (mode == "late" && len(rest) != 2) || (mode != "abandon" && mode != "late") {
		return errUsage
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
	if mode == "abandon" {
		return abandon(conn, out)
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
