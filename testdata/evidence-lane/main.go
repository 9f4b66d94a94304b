// Command evidence-lane is a hand-driven forge-wire/v1 lane for
// scripts/evidence-e2e.sh. It is not a shipped binary.
//
// Usage:
//
//	evidence-lane -gate ws://HOST:PORT -worker ID -token-env NAME [-repo ID] [-plugin ID] take BATCH...
//	evidence-lane -gate ws://HOST:PORT -worker ID -token-env NAME late JOB ATTEMPT BATCH
//
// take connects as slot 0, waits for one lease, then sends each BATCH (a
// file holding {"batch":N,"records":[…]}) as an evidence message for that
// attempt, printing Gate's answer to each, and then stays connected
// without heartbeats or a result until it is killed (so the lease
// expires). late sends one BATCH for the given job and attempt on a fresh
// connection and prints the answer. Output is JSON lines:
// {"event":"welcome"}, {"event":"lease","job_id":…,"attempt_id":…},
// {"event":"evidence","reply":"ack"|"reject","code":…}.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/0k-lab/agent-forge/pkg/wire"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "evidence-lane: error:", err)
		os.Exit(1)
	}
}

type batchFile struct {
	Batch   int               `json:"batch"`
	Records []json.RawMessage `json:"records"`
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("evidence-lane", flag.ContinueOnError)
	gate := fs.String("gate", "", "Gate ws:// URL")
	workerID := fs.String("worker", "", "worker id")
	tokenEnv := fs.String("token-env", "", "variable holding the worker token")
	repo := fs.String("repo", "", "repository id to advertise")
	plugin := fs.String("plugin", "edit", "plugin id to advertise")
	if err := fs.Parse(args); err != nil || fs.NArg() < 1 {
		return errors.New("usage")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	conn, err := wire.Dial(ctx, *gate, os.Getenv(*tokenEnv))
	cancel()
	if err != nil {
		return err
	}
	defer conn.Close()
	out := json.NewEncoder(stdout)
	repos := []string{}
	if *repo != "" {
		repos = []string{*repo}
	}
	hello := &wire.Hello{Protocol: wire.Protocol, WorkerID: *workerID, Plugins: []string{*plugin}, Repositories: repos}
	if err := conn.Send(wire.Envelope{Type: wire.TypeHello, Hello: hello}); err != nil {
		return err
	}
	if e, err := conn.Receive(); err != nil || e.Type != wire.TypeWelcome {
		return errors.New("no welcome")
	}
	out.Encode(map[string]string{"event": "welcome"})
	var job, attempt string
	var files []string
	switch fs.Arg(0) {
	case "take":
		for {
			e, err := conn.Receive()
			if err != nil {
				return err
			}
			if e.Type == wire.TypeLease {
				job, attempt = e.Lease.JobID, e.Lease.AttemptID
				break
			}
		}
		out.Encode(map[string]string{"event": "lease", "job_id": job, "attempt_id": attempt})
		files = fs.Args()[1:]
	case "late":
		if fs.NArg() != 4 {
			return errors.New("usage")
		}
		job, attempt, files = fs.Arg(1), fs.Arg(2), fs.Args()[3:]
	default:
		return errors.New("usage")
	}
	for i, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var bf batchFile
		if err := json.Unmarshal(b, &bf); err != nil {
			return err
		}
		seq := uint64(i + 1)
		ev := wire.Envelope{Type: wire.TypeEvidence, Seq: seq, Evidence: &wire.Evidence{JobID: job, AttemptID: attempt, Batch: bf.Batch, Records: bf.Records}}
		if err := conn.SendDeadline(ev, time.Now().Add(10*time.Second)); err != nil {
			return err
		}
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		for {
			e, err := conn.Receive()
			if err != nil {
				out.Encode(map[string]string{"event": "evidence", "reply": "closed"})
				return nil
			}
			if e.Seq != seq {
				continue
			}
			rec := map[string]string{"event": "evidence", "reply": string(e.Type)}
			if e.Type == wire.TypeReject {
				rec["code"] = string(e.Reject.Code)
			}
			out.Encode(rec)
			break
		}
	}
	out.Encode(map[string]string{"event": "done"})
	if fs.Arg(0) == "take" {
		conn.SetReadDeadline(time.Time{})
		for {
			if _, err := conn.Receive(); err != nil {
				return nil
			}
		}
	}
	return nil
}
