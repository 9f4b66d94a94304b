package githubfake

import (
	"encoding/json"
	"net/http"
	"os"
	"sync"
	"time"
)

// RequestLog appends one JSON object per request to a file. It records no
// header values, bodies or credentials.
type RequestLog struct {
	mu sync.Mutex
	f  *os.File
}

// LogEntry is one line of the request log.
type LogEntry struct {
	Time   string `json:"time"`
	Host   string `json:"host"`
	Method string `json:"method"`
	Path   string `json:"path"`
	Query  string `json:"query,omitempty"`
	Status int    `json:"status"`
}

// OpenLog opens (creating or appending to) the log file at path.
func OpenLog(path string) (*RequestLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	return &RequestLog{f: f}, nil
}

// Add records one request; a nil log records nothing.
func (l *RequestLog) Add(host string, r *http.Request, status int) {
	if l == nil {
		return
	}
	line, _ := json.Marshal(LogEntry{
		Time:   time.Now().UTC().Format(time.RFC3339Nano),
		Host:   host,
		Method: r.Method,
		Path:   r.URL.Path,
		Query:  r.URL.RawQuery,
		Status: status,
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.f.Write(append(line, '\n'))
}

// Close closes the file.
func (l *RequestLog) Close() error {
	if l == nil {
		return nil
	}
	return l.f.Close()
}
