// Command fake-gemini is a deterministic stand-in for Google's Gemini API
// (generativelanguage v1beta), for running the real Gemini CLI offline in
// tests. It listens on 127.0.0.1 (an ephemeral port), writes its address
// to the -addr-file and one JSON line per request to the -log file, and
// answers, also below one path segment (/ID/v1beta/..., as a run pointed at
// a gateway path but driven without a Worker posts):
//
//   - POST /v1beta/models/MODEL:streamGenerateContent?alt=sse: server-sent
//     events, each "data:" a GenerateContentResponse (candidates[0].content
//     with role "model" and its parts, then finishReason STOP, and
//     usageMetadata: promptTokenCount 10, candidatesTokenCount 5);
//   - POST /v1beta/models/MODEL:generateContent: the same answer as one
//     JSON GenerateContentResponse;
//   - POST /v1beta/models/MODEL:countTokens: {"totalTokens":N}.
//
// The conversation is driven by the function responses in the request's
// contents:
//
//   - until the file exists (turn 1): one functionCall creating the file the
//     task asks for ("Create a file named PATH containing one line: TEXT."):
//     the CLI's write_file tool when the request declares it, else its
//     replace tool with an empty old_string; a prompt without that sentence
//     (a Forge task, between its task markers) creates
//     FAKE-GEMINI-<hash>.md holding "task <hash>" instead; a prompt without
//     a task gets a final text at once;
//   - once it was created (turn 2): the final text: when the prompt asks for
//     a JSON object with "commit_subject" (and "summary" and "changes"),
//     exactly that object describing the added file, else "done".
//
// A request asking for JSON (generationConfig.responseMimeType
// application/json: the CLI's own side questions, such as which model to
// route to or who speaks next) is answered with an object naming the first
// enum value, or "user", for each string property of its schema, and is
// logged with utility true.
//
// A line "fake-gemini-mode: MODE" in the prompt picks a fault:
//
// A conversation is its Forge task (the prompt between the task markers),
// so a fault "of each conversation" happens once per task, not once per
// attempt.
//
//	cut-first    the first turn-1 stream of each conversation stops after
//	             its first chunk and the connection is dropped (the CLI
//	             retries; every later stream is normal)
//	unavailable-first
//	             the first turn-1 request of each conversation is answered
//	             503 UNAVAILABLE (the CLI retries)
//	status-401   every request is answered 401 UNAUTHENTICATED
//	status-403   every request is answered 403 PERMISSION_DENIED
//	tool-error   turn 1 first asks replace to change text in a file that
//	             does not exist (the tool fails; the model then goes on)
//	hang         the request is never answered (the fake waits until the
//	             client goes away)
//	slow         every answer waits -slow (default 2s)
//	plant-key    the created file gets a second line: the value of the
//	             variable named by -plant-env
//
// Error bodies are the API's: {"error":{"code","message","status"}}. With
// -tls-ca the fake also speaks TLS on its port (providerfake.Run), which
// is how the Worker's gateway reaches it. Any other method or path is
// answered 404 (and logged). The log line is {"method","path","host",
// "call","turn","mode","tls","via_gateway","authorized","credential",
// "model","tools","tool_errors","utility","canary"}: call is
// streamGenerateContent, generateContent or countTokens; tls, via_gateway,
// authorized and credential are providerfake.Origin's (authorized: the
// x-goog-api-key header equals the value of the variable named by -key-env;
// via_gateway: X-Forge-Via held the value of the variable named by
// -via-env); tools are the declared function names; tool_errors counts
// function responses carrying an error; canary says whether the body holds
// the -canary text. No key is ever logged.
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
		fmt.Fprintln(os.Stderr, "usage: fake-gemini -addr-file FILE -log FILE [-key-env NAME] [-slow D] [-tls-ca FILE] [-via-env NAME] [-plant-env NAME] [-canary TEXT]")
		os.Exit(2)
	}
	err := providerfake.Run(fl.AddrFile, fl.Log, fl.TLSCA, func(log *providerfake.Log, _ int) http.Handler {
		return &server{log: log, key: os.Getenv(fl.KeyEnv), via: os.Getenv(fl.ViaEnv), plant: os.Getenv(fl.PlantEnv), slow: fl.Slow, canary: *canary}
	})
	fmt.Fprintln(os.Stderr, "fake-gemini:", err)
	os.Exit(1)
}

type server struct {
	log    *providerfake.Log
	key    string
	via    string
	plant  string
	slow   time.Duration
	canary string
	once   providerfake.Once // conversations whose first turn-1 request was cut (or refused)
}

type logLine struct {
	Method string `json:"method"`
	Path   string `json:"path"`
	Host   string `json:"host"`
	Call   string `json:"call"`
	Turn   int    `json:"turn"`
	Mode   string `json:"mode"`
	providerfake.Origin
	Model      string   `json:"model"`
	Tools      []string `json:"tools"`
	ToolErrors int      `json:"tool_errors"`
	Utility    bool     `json:"utility"`
	Canary     bool     `json:"canary"`
}

// request is the part of a GenerateContentRequest the fake reads.
type request struct {
	Contents []struct {
		Role  string `json:"role"`
		Parts []part `json:"parts"`
	} `json:"contents"`
	Tools []struct {
		FunctionDeclarations []struct {
			Name string `json:"name"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
	GenerationConfig struct {
		ResponseMimeType   string          `json:"responseMimeType"`
		ResponseJSONSchema json.RawMessage `json:"responseJsonSchema"`
		ResponseSchema     json.RawMessage `json:"responseSchema"`
	} `json:"generationConfig"`
}

type part struct {
	Text             string `json:"text,omitempty"`
	FunctionCall     *call  `json:"functionCall,omitempty"`
	FunctionResponse *struct {
		ID       string         `json:"id"`
		Name     string         `json:"name"`
		Response map[string]any `json:"response"`
	} `json:"functionResponse,omitempty"`
}

type call struct {
	ID   string         `json:"id,omitempty"`
	Name string         `json:"name"`
	Args map[string]any `json:"args"`
}

var (
	// apiPath is a model method, also below one segment (a gateway path).
	apiPath = regexp.MustCompile(`^(?:/[a-z0-9][a-z0-9._-]*)?/v1beta/models/([A-Za-z0-9._-]+):(streamGenerateContent|generateContent|countTokens)$`)
	modeRE  = regexp.MustCompile(`fake-gemini-mode: ([a-z0-9-]+)`)
)

// taskBegin and taskEnd mark a Forge task in the prompt (pkg/agent).
const (
	taskBegin = "===== BEGIN TASK ====="
	taskEnd   = "===== END TASK ====="
)

// Function call ids of the fake's own calls.
const (
	idCreate  = "fake-create"
	idBadEdit = "fake-bad-edit"
)

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	line := logLine{Method: r.Method, Path: r.URL.Path, Host: r.Host, Origin: providerfake.OriginOf(r, "X-Goog-Api-Key", s.key, s.via)}
	m := apiPath.FindStringSubmatch(r.URL.Path)
	if r.Method != http.MethodPost || m == nil {
		s.log.Record(line)
		http.NotFound(w, r)
		return
	}
	line.Model, line.Call = m[1], m[2]
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	line.Canary = s.canary != "" && strings.Contains(string(body), s.canary)
	var req request
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		s.log.Record(line)
		writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Invalid JSON payload received.")
		return
	}
	prompt, created, editFailed := "", false, false
	for _, c := range req.Contents {
		for _, p := range c.Parts {
			switch {
			case c.Role == "user" && p.Text != "":
				prompt += p.Text + "\n"
			case p.FunctionResponse != nil:
				_, failed := p.FunctionResponse.Response["error"]
				if failed {
					line.ToolErrors++
				}
				switch p.FunctionResponse.ID {
				case idCreate:
					created = created || !failed
				case idBadEdit:
					editFailed = true
				}
			}
		}
	}
	line.Tools = []string{}
	offered := map[string]bool{}
	for _, t := range req.Tools {
		for _, d := range t.FunctionDeclarations {
			line.Tools = append(line.Tools, d.Name)
			offered[d.Name] = true
		}
	}
	line.Utility = req.GenerationConfig.ResponseMimeType == "application/json"
	line.Turn = 1
	if created {
		line.Turn = 2
	}
	if mm := modeRE.FindStringSubmatch(prompt); mm != nil {
		line.Mode = mm[1]
	}
	s.log.Record(line)

	if line.Call == "countTokens" {
		writeJSON(w, map[string]any{"totalTokens": 10})
		return
	}
	switch line.Mode {
	case "status-401":
		writeError(w, http.StatusUnauthorized, "UNAUTHENTICATED", "API key not valid. Please pass a valid API key.")
		return
	case "status-403":
		writeError(w, http.StatusForbidden, "PERMISSION_DENIED", "The caller does not have permission.")
		return
	case "hang":
		<-r.Context().Done()
		return
	case "slow":
		time.Sleep(s.slow)
	}
	conv := conversationKey(task(prompt))
	if line.Mode == "unavailable-first" && line.Turn == 1 && !line.Utility && s.once.First("unavailable:"+conv) {
		writeError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "The model is overloaded. Please try again later.")
		return
	}

	var parts []part
	switch {
	case line.Utility:
		parts = []part{{Text: utilityAnswer(req.GenerationConfig.ResponseJSONSchema, req.GenerationConfig.ResponseSchema)}}
	default:
		parts = s.turn(prompt, line.Mode, created, editFailed, offered)
	}
	if line.Call == "generateContent" {
		writeJSON(w, response(parts, true))
		return
	}
	sse := providerfake.StartStream(w)
	if len(parts) == 1 && parts[0].Text != "" && len(parts[0].Text) > 1 {
		// A text arrives in two chunks, as the API streams it.
		half := len(parts[0].Text) / 2
		sse.Data(response([]part{{Text: parts[0].Text[:half]}}, false))
		parts = []part{{Text: parts[0].Text[half:]}}
	} else {
		sse.Data(response([]part{{Text: "Working on it. "}}, false))
	}
	if line.Mode == "cut-first" && line.Turn == 1 && !line.Utility && s.once.First("cut:"+conv) {
		sse.Cut()
		return
	}
	sse.Data(response(parts, true))
	sse.Flush()
}

// turn is the model's answer to one request of the conversation.
func (s *server) turn(prompt, mode string, created, editFailed bool, offered map[string]bool) []part {
	path, text := providerfake.CreateTask(prompt)
	if mode == "plant-key" {
		text += "\n" + s.plant
	}
	if path == "" && strings.Contains(prompt, taskBegin) {
		k := conversationKey(task(prompt))[:12]
		path, text = "FAKE-GEMINI-"+k+".md", "task "+k
	}
	switch {
	case !created && path != "" && mode == "tool-error" && !editFailed:
		return []part{{FunctionCall: &call{ID: idBadEdit, Name: "replace", Args: map[string]any{
			"file_path": "does-not-exist.txt", "old_string": "absent text", "new_string": "other text",
			"instruction": "Change the absent text."}}}}
	case !created && path != "" && offered["write_file"]:
		return []part{{FunctionCall: &call{ID: idCreate, Name: "write_file", Args: map[string]any{
			"file_path": path, "content": text + "\n"}}}}
	case !created && path != "":
		return []part{{FunctionCall: &call{ID: idCreate, Name: "replace", Args: map[string]any{
			"file_path": path, "old_string": "", "new_string": text + "\n", "instruction": "Create the file."}}}}
	}
	props := map[string]json.RawMessage{}
	for _, name := range []string{"commit_subject", "summary", "changes"} {
		if strings.Contains(prompt, `"`+name+`"`) {
			props[name] = nil
		}
	}
	if len(props) == 0 {
		return []part{{Text: "done"}}
	}
	b, _ := json.Marshal(providerfake.Answer(props, path))
	return []part{{Text: string(b)}}
}

// utilityAnswer fills the string properties of a JSON-mode request's
// schema: the first enum value, else "user".
func utilityAnswer(schemas ...json.RawMessage) string {
	var sc struct {
		Properties map[string]struct {
			Type string   `json:"type"`
			Enum []string `json:"enum"`
		} `json:"properties"`
	}
	for _, raw := range schemas {
		if len(raw) > 0 && json.Unmarshal(raw, &sc) == nil && len(sc.Properties) > 0 {
			break
		}
	}
	out := map[string]any{}
	for name, p := range sc.Properties {
		switch {
		case len(p.Enum) > 0:
			out[name] = p.Enum[0]
		case strings.EqualFold(p.Type, "string"):
			out[name] = "user"
		}
	}
	b, _ := json.Marshal(out)
	return string(b)
}

// response is one GenerateContentResponse; final ones end the candidate.
func response(parts []part, final bool) map[string]any {
	cand := map[string]any{"index": 0, "content": map[string]any{"role": "model", "parts": parts}}
	if final {
		cand["finishReason"] = "STOP"
	}
	return map[string]any{
		"candidates":    []any{cand},
		"usageMetadata": map[string]any{"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
		"modelVersion":  "fake-gemini", "responseId": "fake-response",
	}
}

// task is the Forge task of a prompt (between its markers: the CLI's own
// context around it names the attempt's worktree, which differs between
// attempts), else the whole prompt.
func task(prompt string) string {
	if _, rest, ok := strings.Cut(prompt, taskBegin); ok {
		t, _, _ := strings.Cut(rest, taskEnd)
		return t
	}
	return prompt
}

// conversationKey identifies one task's conversation by its prompt.
func conversationKey(prompt string) string {
	h := sha256.Sum256([]byte(prompt))
	return hex.EncodeToString(h[:])
}

func writeJSON(w http.ResponseWriter, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.Write(b)
}

// writeError answers with the API's error body.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": status, "message": msg, "status": code}})
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(status)
	w.Write(b)
}
