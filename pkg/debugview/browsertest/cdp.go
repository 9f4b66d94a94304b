package browsertest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/0k-lab/agent-forge/pkg/strictjson"
)

// maxMessageBytes bounds one DevTools message (screenshots are large).
const maxMessageBytes = 64 << 20

// Flags are the Chromium flags every Browser uses, besides the profile
// directory and the debugging pipe.
func Flags() []string {
	return []string{
		"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-quic", "--disable-extensions", "--disable-default-apps", "--mute-audio",
		"--window-size=1280,900",
	}
}

// Event is one DevTools event.
type Event struct {
	Method    string
	SessionID string
	Params    json.RawMessage
}

// envelope is every DevTools message: a reply carries id and result or
// error; an event carries method and params.
type envelope struct {
	ID        int64           `json:"id,omitempty"`
	Method    string          `json:"method,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Data    string `json:"data,omitempty"`
	} `json:"error,omitempty"`
}

// Browser is one running Chromium.
type Browser struct {
	cmd    *exec.Cmd
	toChr  *os.File
	waited chan struct{}

	writeMu sync.Mutex

	mu      sync.Mutex
	nextID  int64
	pending map[int64]chan envelope
	events  []Event
	changed chan struct{} // closed and replaced whenever events grows
	readErr error
}

// Launch starts Chromium with a fresh profile in userDataDir.
func Launch(binary, userDataDir string) (*Browser, error) {
	// Pipe A: we write, Chromium reads on fd 3. Pipe B: Chromium writes on
	// fd 4, we read.
	aR, aW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("pipe: %w", err)
	}
	bR, bW, err := os.Pipe()
	if err != nil {
		aR.Close()
		aW.Close()
		return nil, fmt.Errorf("pipe: %w", err)
	}
	args := append(Flags(), "--user-data-dir="+userDataDir, "--remote-debugging-pipe", "about:blank")
	cmd := exec.Command(binary, args...)
	cmd.ExtraFiles = []*os.File{aR, bW}
	cmd.Stdin = nil
	cmd.Stdout = io.Discard
	cmd.Stderr = io.Discard
	cmd.Env = append(os.Environ(), "HOME="+userDataDir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		aR.Close()
		aW.Close()
		bR.Close()
		bW.Close()
		return nil, fmt.Errorf("start chromium: %w", err)
	}
	aR.Close()
	bW.Close()
	b := &Browser{cmd: cmd, toChr: aW, waited: make(chan struct{}), pending: map[int64]chan envelope{}, changed: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(b.waited)
	}()
	go b.readLoop(bR)
	return b, nil
}

func (b *Browser) readLoop(r *os.File) {
	defer r.Close()
	br := bufio.NewReaderSize(r, 1<<20)
	var err error
	for {
		var msg []byte
		msg, err = readMessage(br)
		if err != nil {
			break
		}
		var env envelope
		if err = strictjson.Decode(msg, &env); err != nil {
			break
		}
		b.mu.Lock()
		if env.ID != 0 {
			if ch := b.pending[env.ID]; ch != nil {
				delete(b.pending, env.ID)
				ch <- env
			}
		} else if env.Method != "" {
			b.events = append(b.events, Event{Method: env.Method, SessionID: env.SessionID, Params: env.Params})
			close(b.changed)
			b.changed = make(chan struct{})
		}
		b.mu.Unlock()
	}
	b.mu.Lock()
	b.readErr = err
	for id, ch := range b.pending {
		close(ch)
		delete(b.pending, id)
	}
	close(b.changed)
	b.changed = make(chan struct{})
	b.mu.Unlock()
}

func readMessage(br *bufio.Reader) ([]byte, error) {
	var buf bytes.Buffer
	for {
		chunk, err := br.ReadSlice(0)
		if buf.Len()+len(chunk) > maxMessageBytes {
			return nil, errors.New("devtools message too large")
		}
		buf.Write(chunk)
		switch {
		case err == nil:
			return buf.Bytes()[:buf.Len()-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return nil, err
		}
	}
}

// Call sends one command (on a session when sessionID is set) and decodes
// its result into result when result is non-nil.
func (b *Browser) Call(ctx context.Context, sessionID, method string, params, result any) error {
	ch := make(chan envelope, 1)
	b.mu.Lock()
	if b.readErr != nil {
		b.mu.Unlock()
		return fmt.Errorf("%s: browser connection closed", method)
	}
	b.nextID++
	id := b.nextID
	b.pending[id] = ch
	b.mu.Unlock()

	req := map[string]any{"id": id, "method": method}
	if params != nil {
		req["params"] = params
	}
	if sessionID != "" {
		req["sessionId"] = sessionID
	}
	data, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("%s: encode: %w", method, err)
	}
	b.writeMu.Lock()
	_, err = b.toChr.Write(append(data, 0))
	b.writeMu.Unlock()
	if err != nil {
		return fmt.Errorf("%s: write: %w", method, err)
	}
	select {
	case env, ok := <-ch:
		if !ok {
			return fmt.Errorf("%s: browser connection closed", method)
		}
		if env.Error != nil {
			return fmt.Errorf("%s: devtools error %d: %s", method, env.Error.Code, env.Error.Message)
		}
		if result != nil && len(env.Result) > 0 {
			if err := json.Unmarshal(env.Result, result); err != nil {
				return fmt.Errorf("%s: decode result: %w", method, err)
			}
		}
		return nil
	case <-ctx.Done():
		b.mu.Lock()
		delete(b.pending, id)
		b.mu.Unlock()
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

// Events returns a copy of every event received so far.
func (b *Browser) Events() []Event {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Event(nil), b.events...)
}

// WaitEvent returns the first event with the given method at index from or
// later, and its index.
func (b *Browser) WaitEvent(ctx context.Context, method string, from int) (Event, int, error) {
	for {
		b.mu.Lock()
		for i := from; i < len(b.events); i++ {
			if b.events[i].Method == method {
				ev := b.events[i]
				b.mu.Unlock()
				return ev, i, nil
			}
		}
		changed, readErr := b.changed, b.readErr
		b.mu.Unlock()
		if readErr != nil {
			return Event{}, 0, fmt.Errorf("waiting for %s: browser connection closed", method)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return Event{}, 0, fmt.Errorf("waiting for %s: %w", method, ctx.Err())
		}
	}
}

// Close asks Chromium to exit and ends its process group if it does not.
func (b *Browser) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b.Call(ctx, "", "Browser.close", nil, nil)
	select {
	case <-b.waited:
	case <-ctx.Done():
		syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		<-b.waited
	}
	// Helpers Chromium spawned share its process group.
	syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
	return b.toChr.Close()
}
