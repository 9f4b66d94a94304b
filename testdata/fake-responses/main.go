// Command fake-responses is a deterministic stand-in for the OpenAI
// Responses API, for running the real Codex CLI offline in tests. It
// listens on 127.0.0.1 (an ephemeral port), writes its address to the
// -addr-file and one JSON line per request to the -log file, and answers
// POST /v1/responses with a server-sent event stream:
//
//   - a request whose input holds no tool output yet (turn 1) is answered
//     with one call of Codex's freeform apply_patch tool that adds the file
//     the prompt asks for ("Create a file named PATH containing one line:
//     TEXT."); a prompt without that sentence gets a final message at once;
//   - a request that already carries the tool's output (turn 2) is answered
//     with the final message: a JSON object with the properties of the
//     output schema the request names (commit_subject, summary, changes),
//     describing the added file.
//
// A line "fake-responses-mode: MODE[,MODE...]" in the prompt picks the
// modes of the conversation (the probes run in the order named):
//
//	cut-first   the first turn-1 stream of each conversation stops after
//	            its first event and the connection is closed (Codex
//	            retries; every later stream is normal)
//	status-400  every request is answered 400 with a JSON error body
//	status-401  every request is answered 401 invalid_api_key
//	slow        every stream waits -slow (default 2s) before its events
//	env-probe   turn 1 first calls Codex's exec_command tool with `env`;
//	            the request carrying its output is logged with probe_ran
//	            (the output holds PATH=) and probe_saw_key (it holds the
//	            key), then the conversation goes on as usual
//	net-probe   turn 1 first calls exec_command with a bash command that
//	            writes and removes a file in its working directory, then
//	            opens a TCP connection to the fake's own address and sends
//	            GET /net-probe over it (a probe that got through is logged
//	            as that request); the request carrying the command's output
//	            is logged with net_probe_wrote (the file was written),
//	            net_probe_ran (the command got to its end) and
//	            net_probe_reached (it says it connected), then the
//	            conversation goes on as usual
//
//	proc-environ
//	            turn 1 first calls exec_command with the command of issue
//	            35, which writes every /proc/PID/environ the command can
//	            read into NOTE.txt; the request carrying its output is
//	            logged with proc_ran, then the conversation goes on
//	plant-key   the added file gets a second line: the value of the
//	            variable named by -plant-env (a secret the test hands the
//	            model, which the Worker must refuse to commit)
//
// With -tls-ca the fake also speaks TLS on its port (providerfake.Run),
// which is how the Worker's gateway reaches it. Any other method or path
// is answered 404 (and logged). The log line is
// {"method","path","host","turn","mode","tls","via_gateway","authorized",
// "credential","model","effort","tools", and the probe fields} (mode as
// written; the request's model, reasoning effort and tool names, or type
// for unnamed tools): tls, via_gateway, authorized and credential are
// providerfake.Origin's (authorized: the Authorization header was
// "Bearer " plus the value of the variable named by -key-env; via_gateway:
// X-Forge-Via held the value of the variable named by -via-env; credential:
// a header held a gateway credential). No key is ever logged.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/0k-lab/agent-forge/pkg/providerfake"
)

func main() {
	var fl providerfake.Flags
	fl.Register(flag.CommandLine)
	flag.Parse()
	if fl.AddrFile == "" || fl.Log == "" {
		fmt.Fprintln(os.Stderr, "usage: fake-responses -addr-file FILE -log FILE [-key-env NAME] [-slow D] [-tls-ca FILE] [-via-env NAME] [-plant-env NAME]")
		os.Exit(2)
	}
	err := providerfake.Run(fl.AddrFile, fl.Log, fl.TLSCA, func(log *providerfake.Log, port int) http.Handler {
		return &server{log: log, key: os.Getenv(fl.KeyEnv), via: os.Getenv(fl.ViaEnv), plant: os.Getenv(fl.PlantEnv), slow: fl.Slow, port: port}
	})
	fmt.Fprintln(os.Stderr, "fake-responses:", err)
	os.Exit(1)
}

type server struct {
	log   *providerfake.Log
	key   string
	via   string // the X-Forge-Via value of the gateway's requests
	plant string // what plant-key has the agent write
	slow  time.Duration
	port  int               // the port the fake listens on, which net-probe connects to
	cut   providerfake.Once // conversations whose first stream was cut
}

type logLine struct {
	Method string `json:"method"`
	Path   string `json:"path"`
	Host   string `json:"host"`
	Turn   int    `json:"turn"`
	Mode   string `json:"mode"`
	providerfake.Origin
	Model  string   `json:"model"`
	Effort string   `json:"effort"`
	Tools  []string `json:"tools"`
	// env-probe: the command ran (its output holds PATH=) and whether
	// its output held the key.
	ProbeRan    bool `json:"probe_ran"`
	ProbeSawKey bool `json:"probe_saw_key"`
	// net-probe: the command wrote its file, ran to its end, and said it
	// connected.
	NetProbeWrote   bool `json:"net_probe_wrote"`
	NetProbeRan     bool `json:"net_probe_ran"`
	NetProbeReached bool `json:"net_probe_reached"`
	// proc-environ: the command's output came back.
	ProcRan bool `json:"proc_ran"`
}

// request is the part of a Responses request the fake reads.
type request struct {
	Model          string            `json:"model"`
	Input          []json.RawMessage `json:"input"`
	PromptCacheKey string            `json:"prompt_cache_key"`
	Reasoning      struct {
		Effort string `json:"effort"`
	} `json:"reasoning"`
	Tools []struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"tools"`
	Text struct {
		Format struct {
			Schema struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"schema"`
		} `json:"format"`
	} `json:"text"`
}

// The call ids of the probe commands, by mode.
var probeCallIDs = map[string]string{"env-probe": "call_fake_env_probe", "net-probe": "call_fake_net_probe",
	"proc-environ": "call_fake_proc_environ"}

// procEnvironCommand is the command of issue 35: every process's
// environment, as far as the command can read it, into NOTE.txt.
const procEnvironCommand = `for p in $(ls /proc | grep -E '^[0-9]+$'); do cat /proc/$p/environ; echo; done | tr '\0' '\n' > NOTE.txt; for p in $(ls /proc | grep -E '^[0-9]+$'); do echo "== $p $(cat /proc/$p/comm) $(cat /proc/$p/environ | tr '\0' ' ' | head -c 3000)"; done`

// probeCommand is the probe mode's command line (run by Codex's shell);
// port is the fake's. The words the net probe prints are split in the
// source, so that only its output, never an echo of the command, holds
// them.
func probeCommand(mode string, port int) string {
	switch mode {
	case "env-probe":
		return "env"
	case "proc-environ":
		return procEnvironCommand
	}
	return fmt.Sprintf(`bash -c 'if echo probe >net-probe.tmp && rm net-probe.tmp; then echo "net-probe: wr""ote"; fi; `+
		`if exec 3<>/dev/tcp/127.0.0.1/%d; then printf "GET /net-probe HTTP/1.0\r\nHost: probe\r\n\r\n" >&3; echo "net-probe: re""ached"; `+
		`else echo "net-probe: ref""used"; fi'`, port)
}

type inputItem struct {
	Type    string          `json:"type"`
	CallID  string          `json:"call_id"`
	Output  json.RawMessage `json:"output"`
	Role    string          `json:"role"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

var modeRE = regexp.MustCompile(`fake-responses-mode: ([a-z0-9,-]+)`)

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	bearer := ""
	if s.key != "" {
		bearer = "Bearer " + s.key
	}
	line := logLine{Method: r.Method, Path: r.URL.Path, Host: r.Host, Origin: providerfake.OriginOf(r, "Authorization", bearer, s.via)}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/responses" {
		s.log.Record(line)
		http.NotFound(w, r)
		return
	}
	var req request
	if err := json.NewDecoder(io.LimitReader(r.Body, 16<<20)).Decode(&req); err != nil {
		s.log.Record(line)
		http.Error(w, `{"error":{"message":"bad request body"}}`, http.StatusBadRequest)
		return
	}
	prompt, toolDone, probed := "", false, map[string]bool{}
	for _, raw := range req.Input {
		var it inputItem
		if json.Unmarshal(raw, &it) != nil {
			continue
		}
		out := string(it.Output)
		switch {
		case it.Type == "function_call_output" && it.CallID == probeCallIDs["env-probe"]:
			// The env-probe command's output: what a command Codex runs sees.
			probed["env-probe"] = true
			line.ProbeRan = strings.Contains(out, "PATH=")
			line.ProbeSawKey = s.key != "" && strings.Contains(out, s.key)
		case it.Type == "function_call_output" && it.CallID == probeCallIDs["net-probe"]:
			probed["net-probe"] = true
			line.NetProbeWrote = strings.Contains(out, "net-probe: wrote")
			line.NetProbeReached = strings.Contains(out, "net-probe: reached")
			line.NetProbeRan = line.NetProbeReached || strings.Contains(out, "net-probe: refused")
		case it.Type == "function_call_output" && it.CallID == probeCallIDs["proc-environ"]:
			probed["proc-environ"] = true
			line.ProcRan = true
			os.WriteFile("/tmp/gateway-agents-note-debug.txt", []byte(out), 0o600)
		case it.Type == "custom_tool_call_output" || it.Type == "function_call_output":
			toolDone = true
		case it.Type == "message" && it.Role == "user":
			for _, c := range it.Content {
				prompt += c.Text + "\n"
			}
		}
	}
	line.Model, line.Effort, line.Tools = req.Model, req.Reasoning.Effort, []string{}
	for _, t := range req.Tools {
		if t.Name != "" {
			line.Tools = append(line.Tools, t.Name)
		} else {
			line.Tools = append(line.Tools, t.Type)
		}
	}
	line.Turn = 1
	if toolDone {
		line.Turn = 2
	}
	var modes []string
	if m := modeRE.FindStringSubmatch(prompt); m != nil {
		line.Mode = m[1]
		modes = strings.Split(m[1], ",")
	}
	s.log.Record(line)
	mode := func(name string) bool { return slices.Contains(modes, name) }
	probe := "" // the next probe mode whose command has not run yet
	for _, m := range modes {
		if probeCallIDs[m] != "" && !probed[m] && !toolDone {
			probe = m
			break
		}
	}

	if mode("status-400") {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"error":{"message":"the fake provider refuses this request","type":"invalid_request_error","code":"fake_refusal"}}`)
		return
	}
	if mode("status-401") {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","code":"invalid_api_key"}}`)
		return
	}
	if mode("slow") {
		time.Sleep(s.slow)
	}
	path, text := providerfake.CreateTask(prompt)
	sse := providerfake.StartStream(w)
	sse.Event("response.created", map[string]any{"response": map[string]any{"id": "resp_fake"}})
	if mode("cut-first") && line.Turn == 1 && s.cut.First(req.PromptCacheKey) {
		sse.Cut()
		return
	}
	if probe != "" {
		args, _ := json.Marshal(map[string]any{"cmd": probeCommand(probe, s.port), "login": false, "tty": false})
		sse.Event("response.output_item.done", map[string]any{"item": map[string]any{
			"type": "function_call", "id": "fc_fake", "call_id": probeCallIDs[probe],
			"name": "exec_command", "arguments": string(args), "status": "completed"}})
	} else if line.Turn == 1 && path != "" {
		patch := "*** Begin Patch\n*** Add File: " + path + "\n+" + text + "\n"
		if mode("plant-key") {
			patch += "+" + s.plant + "\n"
		}
		patch += "*** End Patch\n"
		sse.Event("response.output_item.done", map[string]any{"item": map[string]any{
			"type": "custom_tool_call", "id": "ctc_fake", "call_id": "call_fake_patch",
			"name": "apply_patch", "input": patch, "status": "completed"}})
	} else {
		sse.Event("response.output_item.done", map[string]any{"item": map[string]any{
			"type": "message", "role": "assistant", "id": "msg_fake",
			"content": []any{map[string]any{"type": "output_text", "text": finalMessage(req, path)}}}})
	}
	sse.Event("response.completed", map[string]any{"response": map[string]any{"id": "resp_fake",
		"usage": map[string]any{"input_tokens": 10, "input_tokens_details": nil, "output_tokens": 5,
			"output_tokens_details": nil, "total_tokens": 15}}})
	sse.Flush()
}

// finalMessage is the answer to the request's output schema: only the
// properties it names, describing the added file.
func finalMessage(req request, path string) string {
	props := req.Text.Format.Schema.Properties
	if len(props) == 0 {
		return "done"
	}
	b, _ := json.Marshal(providerfake.Answer(props, path))
	return string(b)
}
