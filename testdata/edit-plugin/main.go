// Command edit-plugin is a deterministic workspace_edit plugin for tests
// and e2e scripts. Its instruction is a small script, one command per
// line, applied inside the workspace:
//
//	write PATH TEXT      write TEXT and a newline to PATH (parents created)
//	symlink PATH TARGET  create a symlink
//	delete PATH          remove PATH
//	subject TEXT         answer with commit_subject TEXT
//	report S|C1|C2…      answer with the agent report (summary, changes)
//	gitfile REL TEXT     write TEXT to REL under the repository's git dir
//	                     (misbehaviour the Worker must catch)
//	gitrm REL            remove REL under the repository's git dir
//	                     (misbehaviour, e.g. deleting a loose ref)
//	signal FIFO          open the named pipe FIFO for writing and close it
//	await FIFO           open the named pipe FIFO and read it to its end
//	                     (signal and await let a test order events; with
//	                     unix:PATH instead of FIFO they connect to that
//	                     UNIX socket, close at once or read to the end,
//	                     which works from inside the Worker's sandbox too)
//	head SHA             point the worktree's HEAD at SHA (misbehaviour)
//	sparse admin|common|tree REL [SIZE]  make REL under the worktree's
//	                     admin dir, the repository's git dir or the
//	                     workspace a sparse file of SIZE bytes (1 TiB)
//	fail                 end with failure{execution_failed}
//	incompatible         end with failure{incompatible} (a misconfigured agent)
//	wait                 block until cancelled
//	model PROVIDER N     call the model N times through the Worker's
//	                     gateway (FORGE_GATEWAY_URL, FORGE_GATEWAY_TOKEN):
//	                     POST .../PROVIDER/responses; a refusal (any
//	                     status but 200) ends with failure{execution_failed}
//
// Unknown commands end with failure{invalid_request}. An intake
// instruction (docs/intake.md: the issue's text quoted between
// "<<<ISSUE TEXT t>>>" and "<<<END ISSUE TEXT t>>>") is read as the
// script of the quoted body's and request's lines only, where write,
// subject and report are run and every other line is skipped (it is an
// issue's prose). It
// emits fixed progress text only.
package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/0k-lab/agent-forge/pkg/plugin"
	"github.com/0k-lab/agent-forge/pkg/plugin/serve"
)

func main() {
	caps := []plugin.Capability{plugin.CapWorkspaceEdit, plugin.CapCancel, plugin.CapCommitSubject, plugin.CapAgentReport}
	if err := serve.ServeWithProgress(context.Background(), os.Stdin, os.Stdout, caps, edit); err != nil {
		os.Exit(1)
	}
}

func edit(ctx context.Context, req serve.Request, progress serve.Progress) (serve.Result, error) {
	progress(plugin.StageStarted, "editing")
	var res serve.Result
	ws := req.Workspace
	lines, framed := issueBody(req.Instruction)
	if !framed {
		lines = strings.Split(req.Instruction, "\n")
	}
	for _, line := range lines {
		cmd, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
		arg, text, _ := strings.Cut(rest, " ")
		if framed && cmd != "write" && cmd != "subject" && cmd != "report" {
			continue
		}
		var err error
		switch cmd {
		case "":
		case "write":
			p := filepath.Join(ws, arg)
			if err = os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
				err = os.WriteFile(p, []byte(text+"\n"), 0o644)
			}
		case "symlink":
			err = os.Symlink(text, filepath.Join(ws, arg))
		case "delete":
			err = os.RemoveAll(filepath.Join(ws, arg))
		case "subject":
			res.CommitSubject = rest
		case "report":
			parts := strings.Split(rest, "|")
			res.Summary, res.Changes = parts[0], parts[1:]
		case "gitfile":
			var common string
			if common, err = commonDir(ws); err == nil {
				p := filepath.Join(common, arg)
				if err = os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
					err = os.WriteFile(p, []byte(text+"\n"), 0o755)
				}
			}
		case "gitrm":
			var common string
			if common, err = commonDir(ws); err == nil {
				err = os.Remove(filepath.Join(common, arg))
			}
		case "signal":
			var f io.ReadWriteCloser
			if f, err = openRendezvous(arg, os.O_WRONLY); err == nil {
				err = f.Close()
			}
		case "await":
			var f io.ReadWriteCloser
			if f, err = openRendezvous(arg, os.O_RDONLY); err == nil {
				_, err = io.Copy(io.Discard, f)
				f.Close()
			}
		case "head":
			var admin string
			if admin, err = adminDir(ws); err == nil {
				err = os.WriteFile(filepath.Join(admin, "HEAD"), []byte(arg+"\n"), 0o644)
			}
		case "sparse":
			// sparse admin|common|tree NAME [SIZE]: NAME there becomes a
			// sparse file of SIZE bytes (1 TiB).
			var dir string
			switch arg {
			case "admin":
				dir, err = adminDir(ws)
			case "tree":
				dir = ws
			default:
				dir, err = commonDir(ws)
			}
			name, sizeText, _ := strings.Cut(text, " ")
			size := int64(1 << 40)
			if sizeText != "" && err == nil {
				size, err = strconv.ParseInt(sizeText, 10, 64)
			}
			if err == nil {
				p := filepath.Join(dir, name)
				var f *os.File
				if err = os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
					if f, err = os.OpenFile(p, os.O_WRONLY|os.O_CREATE, 0o755); err == nil {
						err = errors.Join(f.Truncate(size), f.Close())
					}
				}
			}
		case "fail":
			return serve.Result{}, serve.Fail(plugin.CategoryExecutionFailed)
		case "incompatible":
			return serve.Result{}, serve.Fail(plugin.CategoryIncompatible)
		case "wait":
			<-ctx.Done()
			return serve.Result{}, serve.Fail(plugin.CategoryCancelled)
		case "model":
			err = callModel(ctx, arg, text)
		default:
			return serve.Result{}, serve.Fail(plugin.CategoryInvalidRequest)
		}
		if err != nil {
			return serve.Result{}, serve.Fail(plugin.CategoryExecutionFailed)
		}
	}
	progress(plugin.StageFinalizing, "done")
	return res, nil
}

// issueBody returns the script lines of an intake instruction: the
// quoted body's (after "Body:") and the request's (after "Request by …",
// up to a review comment's place), never the other comments'.
func issueBody(instruction string) ([]string, bool) {
	_, rest, ok := strings.Cut(instruction, "\n<<<ISSUE TEXT ")
	if !ok {
		return nil, false
	}
	token, rest, _ := strings.Cut(rest, ">>>\n")
	quoted, _, ok := strings.Cut(rest, "<<<END ISSUE TEXT "+token+">>>")
	if !ok || !strings.Contains(quoted, "\nBody:\n") {
		return nil, false
	}
	var out []string
	run := false
	for _, line := range strings.Split(quoted, "\n") {
		switch {
		case line == "Body:" || strings.HasPrefix(line, "Request by "):
			run = true
			continue
		case strings.HasPrefix(line, "Comment by ") || strings.HasPrefix(line, "[Agent Forge left out") ||
			strings.HasPrefix(line, "The review comment is on the file "):
			run = false
		}
		if run {
			out = append(out, line)
		}
	}
	return out, true
}

// callModel posts n (text) Responses requests to provider through the
// gateway; any answer but 200 is an error.
func callModel(ctx context.Context, provider, text string) error {
	n, err := strconv.Atoi(text)
	if err != nil {
		return err
	}
	url := os.Getenv(plugin.EnvGatewayURL) + "/" + provider + "/responses"
	for i := 0; i < n; i++ {
		req, err := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(`{"model":"m","input":"hi","stream":true}`))
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+os.Getenv(plugin.EnvGatewayToken))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return errors.New("the model refused")
		}
	}
	return nil
}

// openRendezvous opens a FIFO, or connects to the UNIX socket unix:PATH
// (the sandbox lets a plugin open no TCP connection but to the Worker's
// gateway).
func openRendezvous(arg string, flag int) (io.ReadWriteCloser, error) {
	if path, ok := strings.CutPrefix(arg, "unix:"); ok {
		return net.Dial("unix", path)
	}
	return os.OpenFile(arg, flag, 0)
}

func adminDir(ws string) (string, error) {
	b, err := os.ReadFile(filepath.Join(ws, ".git"))
	if err != nil {
		return "", err
	}
	p, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: ")
	if !ok {
		return "", errors.New("not a worktree")
	}
	return p, nil
}

func commonDir(ws string) (string, error) {
	admin, err := adminDir(ws)
	if err != nil {
		return "", err
	}
	return filepath.Dir(filepath.Dir(admin)), nil
}
