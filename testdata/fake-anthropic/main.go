// Command fake-anthropic is a deterministic stand-in for the Anthropic
// Messages API, for running the real Claude Code CLI offline in tests. It
// listens on 127.0.0.1 (an ephemeral port), writes its address to the
// -addr-file and one JSON line per request to the -log file, and answers
// POST /v1/messages (Claude Code adds ?beta=true; also below one path
// segment, /ID/v1/messages, as a run pointed at a gateway path but
// driven without a Worker posts) with the documented
// streaming format: server-sent events message_start, content_block_start,
// content_block_delta (text_delta, input_json_delta), content_block_stop,
// message_delta (stop_reason, usage) and message_stop, with a ping.
//
// The conversation is driven by the last tool result in the request:
//
//   - until the file exists (turn 1): one tool_use creating, in the working
//     directory the system prompt names, the file the task asks for
//     ("Create a file named PATH containing one line: TEXT."): Claude
//     Code's Write tool when the request offers it, else its Edit tool with
//     an empty old_string (which creates a missing file); a prompt without
//     that sentence (a Forge task, between its task markers) creates
//     FAKE-ANTHROPIC-<hash>.md holding "task <hash>" instead; a prompt
//     without a task gets a final text at once;
//   - once it was created (turn 2): when the request offers Claude Code's
//     StructuredOutput tool (--json-schema), one call of it with the
//     properties its input schema names (commit_subject, summary, changes)
//     describing the added file; otherwise the final text;
//   - after the StructuredOutput result: the final text ("done").
//
// A line "fake-anthropic-mode: MODE" in the prompt picks a fault:
//
//	cut-first   the first turn-1 stream of each conversation stops after
//	            message_start and the connection is dropped (Claude Code
//	            retries; every later stream is normal)
//	status-401  every request is answered 401 authentication_error
//	overloaded-first
//	            the first turn-1 request of each conversation is answered
//	            529 overloaded_error (Claude Code retries)
//	tool-error  turn 1 first asks Edit to replace text in a file that does
//	            not exist (the tool fails; the model then goes on normally)
//	escape      turn 1 first asks Edit to create a file next to the working
//	            directory, outside it (Claude Code must refuse)
//	hang        the request is never answered (the fake waits until the
//	            client goes away)
//	slow        every stream waits -slow (default 2s) before its events
//	plant-key   the created file gets a second line: the value of the
//	            variable named by -plant-env (a secret the test hands the
//	            model, which the Worker must refuse to commit)
//
// With -tls-ca the fake also speaks TLS on its port (providerfake.Run),
// which is how the Worker's gateway reaches it. Any other method or path
// is answered 404 (and logged). The log line is
// {"method","path","host","turn","mode","tls","via_gateway","authorized",
// "credential","model","effort","tools","tool_errors","structured",
// "canary"}: tls, via_gateway, authorized and credential are
// providerfake.Origin's (authorized: the x-api-key header equals the value
// of the variable named by -key-env; via_gateway: X-Forge-Via held the
// value of the variable named by -via-env; credential: a header held a
// gateway credential); effort is output_config.effort; tool_errors counts
// tool results marked is_error; structured says whether StructuredOutput
// was offered; canary whether the body holds the -canary text. No key is
// ever logged.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/0k-lab/agent-forge/pkg/providerfake"
)

func main() {
	var fl providerfake.Flags
	fl.Register(flag.CommandLine)
	canary := flag.String("canary", "", "text whose presence in a request body is logged")
	flag.Parse()
	if fl.AddrFile == "" || fl.Log == "" {
		fmt.Fprintln(os.Stderr, "usage: fake-anthropic -addr-file FILE -log FILE [-key-env NAME] [-slow D] [-tls-ca FILE] [-via-env NAME] [-plant-env NAME] [-canary TEXT]")
		os.Exit(2)
	}
	err := providerfake.Run(fl.AddrFile, fl.Log, fl.TLSCA, func(log *providerfake.Log, _ int) http.Handler {
		return &server{log: log, key: os.Getenv(fl.KeyEnv), via: os.Getenv(fl.ViaEnv), plant: os.Getenv(fl.PlantEnv), slow: fl.Slow, canary: *canary}
	})
	fmt.Fprintln(os.Stderr, "fake-anthropic:", err)
	os.Exit(1)
}

type server struct {
	log    *providerfake.Log
	key    string
	via    string // the X-Forge-Via value of the gateway's requests
	plant  string // what plant-key has the agent write
	slow   time.Duration
	canary string
	cut    providerfake.Once // conversations whose first stream was cut (or overloaded)
}

type logLine struct {
	Method string `json:"method"`
	Path   string `json:"path"`
	Host   string `json:"host"`
	Turn   int    `json:"turn"`
	Mode   string `json:"mode"`
	providerfake.Origin
	Model      string   `json:"model"`
	Effort     string   `json:"effort"`
	Tools      []string `json:"tools"`
	ToolErrors int      `json:"tool_errors"`
	Structured bool     `json:"structured"`
	Canary     bool     `json:"canary"`
}

// request is the part of a Messages request the fake reads.
type request struct {
	Model        string          `json:"model"`
	System       json.RawMessage `json:"system"`
	Messages     []message       `json:"messages"`
	OutputConfig struct {
		Effort string `json:"effort"`
	} `json:"output_config"`
	Tools []struct {
		Name        string `json:"name"`
		InputSchema struct {
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"input_schema"`
	} `json:"tools"`
}

type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"` // a string or content blocks
}

type block struct {
	Type      string `json:"type"`
	Text      string `json:"text"`
	ID        string `json:"id"`
	Name      string `json:"name"`
	ToolUseID string `json:"tool_use_id"`
	IsError   bool   `json:"is_error"`
}

func blocks(raw json.RawMessage) []block {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []block{{Type: "text", Text: s}}
	}
	var bs []block
	json.Unmarshal(raw, &bs)
	return bs
}

var (
	// messagesPath is the Messages API's path, also below one segment (a
	// gateway path a run outside a Worker names: ID/v1/messages).
	messagesPath = regexp.MustCompile(`^(/[a-z0-9][a-z0-9._-]*)?/v1/messages$`)
	modeRE       = regexp.MustCompile(`fake-anthropic-mode: ([a-z0-9-]+)`)
	cwdRE        = regexp.MustCompile(`(?:CWD|[Ww]orking directory): (/[^\s"\\]*)`)
)

const structuredTool = "StructuredOutput"

// taskBegin marks a Forge task in the prompt (pkg/agent).
const taskBegin = "===== BEGIN TASK ====="

// Tool use ids of the fake's own calls.
const (
	idWrite   = "toolu_fake_write"
	idCreate  = "toolu_fake_create"
	idBadEdit = "toolu_fake_bad_edit"
	idEscape  = "toolu_fake_escape"
)

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	line := logLine{Method: r.Method, Path: r.URL.Path, Host: r.Host, Origin: providerfake.OriginOf(r, "X-Api-Key", s.key, s.via)}
	if r.Method != http.MethodPost || !messagesPath.MatchString(r.URL.Path) {
		s.log.Record(line)
		http.NotFound(w, r)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	line.Canary = s.canary != "" && strings.Contains(string(body), s.canary)
	var req request
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		s.log.Record(line)
		writeError(w, http.StatusBadRequest, "invalid_request_error", "bad request body")
		return
	}
	prompt, lastTool := "", ""
	created, editFailed := false, false
	toolNames := map[string]string{} // tool_use id -> tool name
	for _, m := range req.Messages {
		for _, b := range blocks(m.Content) {
			switch {
			case m.Role == "user" && b.Type == "text":
				prompt += b.Text + "\n"
			case b.Type == "tool_use":
				toolNames[b.ID] = b.Name
			case b.Type == "tool_result":
				lastTool = toolNames[b.ToolUseID]
				if b.IsError {
					line.ToolErrors++
				}
				switch b.ToolUseID {
				case idWrite, idCreate:
					created = created || !b.IsError
				case idBadEdit, idEscape:
					editFailed = true
				}
			}
		}
	}
	line.Model, line.Effort, line.Tools = req.Model, req.OutputConfig.Effort, []string{}
	var structured map[string]json.RawMessage
	offered := map[string]bool{}
	for _, t := range req.Tools {
		line.Tools = append(line.Tools, t.Name)
		offered[t.Name] = true
		if t.Name == structuredTool {
			structured = t.InputSchema.Properties
			line.Structured = true
		}
	}
	line.Turn = 1
	if created {
		line.Turn = 2
	}
	if m := modeRE.FindStringSubmatch(prompt); m != nil {
		line.Mode = m[1]
	}
	s.log.Record(line)

	switch line.Mode {
	case "status-401":
		writeError(w, http.StatusUnauthorized, "authentication_error", "invalid x-api-key")
		return
	case "hang":
		<-r.Context().Done()
		return
	case "overloaded-first":
		if line.Turn == 1 && s.cut.First("overloaded:"+conversationKey(prompt)) {
			writeError(w, 529, "overloaded_error", "Overloaded")
			return
		}
	case "slow":
		time.Sleep(s.slow)
	}
	path, text := providerfake.CreateTask(prompt)
	if line.Mode == "plant-key" {
		text += "\n" + s.plant
	}
	if path == "" && strings.Contains(prompt, taskBegin) {
		// Any other task: a file of its own recording it.
		k := conversationKey(prompt)[:12]
		path, text = "FAKE-ANTHROPIC-"+k+".md", "task "+k
	}
	cwd := ""
	if m := cwdRE.FindSubmatch(req.System); m != nil {
		cwd = string(m[1])
	}
	sse := stream{providerfake.StartStream(w)}
	sse.Event("message_start", map[string]any{"message": map[string]any{
		"id": "msg_fake", "type": "message", "role": "assistant", "content": []any{},
		"model": req.Model, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 10, "output_tokens": 1}}})
	if line.Mode == "cut-first" && line.Turn == 1 && s.cut.First(conversationKey(prompt)) {
		sse.Cut()
		return
	}
	sse.Event("ping", map[string]any{})
	switch {
	case !created && path != "" && cwd != "" && line.Mode == "tool-error" && !editFailed:
		sse.toolUse(idBadEdit, "Edit", map[string]any{
			"file_path":  filepath.Join(cwd, "does-not-exist.txt"),
			"old_string": "absent text", "new_string": "other text"})
	case !created && path != "" && cwd != "" && line.Mode == "escape" && !editFailed:
		sse.toolUse(idEscape, "Edit", map[string]any{
			"file_path":  filepath.Join(filepath.Dir(cwd), "escaped.txt"),
			"old_string": "", "new_string": "outside the workspace\n"})
	case !created && path != "" && cwd != "" && offered["Write"]:
		sse.toolUse(idWrite, "Write", map[string]any{
			"file_path": filepath.Join(cwd, path), "content": text + "\n"})
	case !created && path != "" && cwd != "":
		// Claude Code's Edit creates a missing file from an empty old_string.
		sse.toolUse(idCreate, "Edit", map[string]any{
			"file_path": filepath.Join(cwd, path), "old_string": "", "new_string": text + "\n"})
	case lastTool != structuredTool && structured != nil:
		sse.toolUse("toolu_fake_structured", structuredTool, providerfake.Answer(structured, path))
	default:
		sse.text("done")
	}
	sse.Flush()
}

// conversationKey identifies one task's conversation by its prompt.
func conversationKey(prompt string) string {
	h := sha256.Sum256([]byte(prompt))
	return hex.EncodeToString(h[:])
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	b, _ := json.Marshal(map[string]any{"type": "error",
		"error": map[string]any{"type": typ, "message": msg}, "request_id": "req_fake"})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Request-Id", "req_fake")
	w.WriteHeader(status)
	w.Write(b)
}

// stream is a Messages API event stream.
type stream struct {
	*providerfake.Stream
}

// toolUse streams one tool_use block, its input in two JSON fragments,
// and ends the message with stop_reason tool_use.
func (s stream) toolUse(id, name string, input map[string]any) {
	b, _ := json.Marshal(input)
	half := len(b) / 2
	s.Event("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{
		"type": "tool_use", "id": id, "name": name, "input": map[string]any{}}})
	for _, part := range []string{string(b[:half]), string(b[half:])} {
		s.Event("content_block_delta", map[string]any{"index": 0,
			"delta": map[string]any{"type": "input_json_delta", "partial_json": part}})
	}
	s.Event("content_block_stop", map[string]any{"index": 0})
	s.end("tool_use")
}

// text streams one text block and ends the message with end_turn.
func (s stream) text(t string) {
	s.Event("content_block_start", map[string]any{"index": 0,
		"content_block": map[string]any{"type": "text", "text": ""}})
	s.Event("content_block_delta", map[string]any{"index": 0,
		"delta": map[string]any{"type": "text_delta", "text": t}})
	s.Event("content_block_stop", map[string]any{"index": 0})
	s.end("end_turn")
}

func (s stream) end(reason string) {
	s.Event("message_delta", map[string]any{"delta": map[string]any{"stop_reason": reason, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": 5}})
	s.Event("message_stop", map[string]any{})
}
