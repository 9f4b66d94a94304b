// Package providerfake is the plumbing the local stand-ins for model
// provider APIs share (testdata/fake-anthropic for the Anthropic Messages
// API, testdata/fake-responses for the OpenAI Responses API,
// testdata/fake-gemini for the Gemini API), used only by
// the e2e scripts that run the real agent CLIs offline. Each fake keeps its
// own protocol: the request it reads, the events it streams and its modes.
//
// Here: the command line both take (Flags), serving on an ephemeral
// loopback port whose address goes to a file (Run), in plain HTTP and, with
// -tls-ca, also in TLS from a fresh test authority (the model gateway
// forwards only to https upstreams), where each request came from and
// which credential it carried (Origin), the JSON-lines request log (Log),
// remembering the first time a
// conversation reaches a fault (Once), a server-sent event stream that can
// also be cut the way a network cut would (Stream), and the two shared
// parts of the scripted conversation: the "Create a file named PATH
// containing one line: TEXT." task (CreateTask) and the structured answer
// describing the added file (Answer).
package providerfake

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"
)

// Flags are the command line both fakes take.
type Flags struct {
	AddrFile string        // -addr-file: where the listen address goes
	Log      string        // -log: the request log
	KeyEnv   string        // -key-env: the variable holding the expected API key
	Slow     time.Duration // -slow: the delay of the slow mode (2s)
	TLSCA    string        // -tls-ca: where the test authority's certificate goes ("": plain HTTP only)
	ViaEnv   string        // -via-env: the variable holding the value the gateway's X-Forge-Via header must carry
	PlantEnv string        // -plant-env: the variable holding the text the plant-key mode has the agent write
}

// Register defines the flags on fs.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.AddrFile, "addr-file", "", "file to write the listen address to")
	fs.StringVar(&f.Log, "log", "", "file to append one JSON line per request to")
	fs.StringVar(&f.KeyEnv, "key-env", "", "environment variable holding the expected API key")
	fs.DurationVar(&f.Slow, "slow", 2*time.Second, "delay of the slow mode")
	fs.StringVar(&f.TLSCA, "tls-ca", "", "also serve TLS, writing the test authority's certificate (PEM) to this file")
	fs.StringVar(&f.ViaEnv, "via-env", "", "environment variable holding the expected X-Forge-Via header value")
	fs.StringVar(&f.PlantEnv, "plant-env", "", "environment variable holding the text the plant-key mode plants")
}

// ViaHeader is the header an operator's worker.json gives the fake's
// provider (its "headers"), so that the fake can tell a request the
// gateway forwarded from one that reached it some other way.
const ViaHeader = "X-Forge-Via"

// Origin is where one request came from and which credential it carried.
type Origin struct {
	// TLS: the request came over TLS (the gateway reaches upstreams only
	// so; an agent's own plain connection does not).
	TLS bool `json:"tls"`
	// ViaGateway: the request carried ViaHeader with the expected value.
	ViaGateway bool `json:"via_gateway"`
	// Authorized: the key header carried the real key.
	Authorized bool `json:"authorized"`
	// Credential: some header carried a gateway credential ("fgw-"), which
	// the gateway must have replaced.
	Credential bool `json:"credential"`
}

// OriginOf reads r's origin; keyHeader is the header the provider reads
// its key from, keyValue the value it must hold; via is the expected
// ViaHeader value ("" never matches).
func OriginOf(r *http.Request, keyHeader, keyValue, via string) Origin {
	o := Origin{TLS: r.TLS != nil, ViaGateway: via != "" && r.Header.Get(ViaHeader) == via,
		Authorized: keyValue != "" && r.Header.Get(keyHeader) == keyValue}
	for _, vs := range r.Header {
		for _, v := range vs {
			o.Credential = o.Credential || strings.Contains(v, "fgw-")
		}
	}
	return o
}

// Run opens the request log at logPath (appending, mode 0600), listens on
// 127.0.0.1 on an ephemeral port, asks handler for the server of that log
// and port, writes the address and a newline to addrFile (mode 0600) and
// serves until serving fails. With tlsCA set, a connection that starts
// with a TLS handshake is served in TLS with a certificate from a fresh
// test authority whose certificate goes to tlsCA (NewTLS), any other in
// plain HTTP, on the same port.
func Run(addrFile, logPath, tlsCA string, handler func(log *Log, port int) http.Handler) error {
	f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	h := handler(&Log{w: f}, l.Addr().(*net.TCPAddr).Port)
	if tlsCA != "" {
		cfg, err := NewTLS(tlsCA)
		if err != nil {
			return err
		}
		cfg.NextProtos = []string{"http/1.1"} // Stream.Cut hijacks the connection
		l = newSniffListener(l, cfg)
	}
	if err := os.WriteFile(addrFile, []byte(l.Addr().String()+"\n"), 0o600); err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	return srv.Serve(l)
}

// Log appends one JSON line per record; it is safe for concurrent use.
type Log struct {
	mu sync.Mutex
	w  io.Writer
}

// NewLog returns a Log writing to w.
func NewLog(w io.Writer) *Log { return &Log{w: w} }

// Record appends v, marshalled as JSON, and a newline.
func (l *Log) Record(v any) {
	b, _ := json.Marshal(v)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.w.Write(append(b, '\n'))
}

// Once remembers keys; its zero value is ready for use and it is safe for
// concurrent use.
type Once struct {
	mu   sync.Mutex
	seen map[string]bool
}

// First reports whether key is new (and remembers it).
func (o *Once) First(key string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.seen[key] {
		return false
	}
	if o.seen == nil {
		o.seen = map[string]bool{}
	}
	o.seen[key] = true
	return true
}

// Stream writes server-sent events to one response.
type Stream struct {
	w http.ResponseWriter
}

// StartStream answers 200 with an uncached text/event-stream body.
func StartStream(w http.ResponseWriter) *Stream {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return &Stream{w: w}
}

// Event writes one event named typ whose data is fields, with its "type"
// member set to typ, as JSON.
func (s *Stream) Event(typ string, fields map[string]any) {
	fields["type"] = typ
	b, _ := json.Marshal(fields)
	fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", typ, b)
}

// Data writes one unnamed event whose data is v as JSON (the Gemini
// API's server-sent events carry no event name).
func (s *Stream) Data(v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintf(s.w, "data: %s\r\n\r\n", b)
}

// Flush sends what was written so far.
func (s *Stream) Flush() {
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
}

// Cut sends what was written so far and drops the connection without
// ending the chunked body, as a network cut would. It panics when the
// connection cannot be taken over (net/http then drops it too).
func (s *Stream) Cut() {
	s.Flush()
	h, ok := s.w.(http.Hijacker)
	if !ok {
		panic(errors.New("providerfake: connection cannot be hijacked"))
	}
	conn, buf, err := h.Hijack()
	if err != nil {
		panic(err)
	}
	buf.Flush()
	conn.Close()
}

var createRE = regexp.MustCompile(`Create a file named ([A-Za-z0-9._/-]+) containing one line: ([^\n]*)\.`)

// CreateTask finds the sentence "Create a file named PATH containing one
// line: TEXT." in prompt and returns PATH and TEXT ("" and "" without one).
func CreateTask(prompt string) (path, text string) {
	if m := createRE.FindStringSubmatch(prompt); m != nil {
		return m[1], m[2]
	}
	return "", ""
}

// Answer is the structured answer to an output schema with the properties
// props: only the ones among commit_subject, summary and changes that it
// names, describing the file path added ("nothing" for an empty path).
func Answer(props map[string]json.RawMessage, path string) map[string]any {
	what := "nothing"
	if path != "" {
		what = path
	}
	msg := map[string]any{}
	if _, ok := props["commit_subject"]; ok {
		msg["commit_subject"] = "feat: add " + what
	}
	if _, ok := props["summary"]; ok {
		msg["summary"] = "Added " + what + " as the task asked."
	}
	if _, ok := props["changes"]; ok {
		msg["changes"] = []string{what + ": new file with one line"}
	}
	return msg
}
