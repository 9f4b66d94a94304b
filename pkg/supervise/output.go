package supervise

import (
	"io"
	"sync"
	"sync/atomic"
)

// budget is one combined output allowance shared by stdout and stderr.
type budget struct {
	limit    int64
	used     atomic.Int64
	once     sync.Once
	exceeded chan struct{}
	onExceed func() // called once, when the budget is first exceeded
}

func newBudget(limit int64) *budget {
	return &budget{limit: limit, exceeded: make(chan struct{})}
}

// add charges n bytes and reports whether the budget still holds.
func (b *budget) add(n int) bool {
	if b.used.Add(int64(n)) > b.limit {
		b.once.Do(func() {
			close(b.exceeded)
			if b.onExceed != nil {
				b.onExceed()
			}
		})
		return false
	}
	return true
}

func (b *budget) over() bool { return b.used.Load() > b.limit }

// meteredReader charges every byte read against the budget and fails with
// ErrOutputLimit, returning nothing more, once the budget is exceeded.
type meteredReader struct {
	r io.Reader
	b *budget
}

func (m *meteredReader) Read(p []byte) (int, error) {
	if m.b.over() {
		return 0, ErrOutputLimit
	}
	n, err := m.r.Read(p)
	if n > 0 && !m.b.add(n) {
		return 0, ErrOutputLimit
	}
	return n, err
}

// headBuffer keeps the first limit bytes written and counts the rest.
type headBuffer struct {
	mu    sync.Mutex
	limit int
	buf   []byte
	n     int64
}

func (h *headBuffer) write(p []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n += int64(len(p))
	if room := h.limit - len(h.buf); room > 0 {
		h.buf = append(h.buf, p[:min(room, len(p))]...)
	}
}

func (h *headBuffer) count(n int) {
	h.mu.Lock()
	h.n += int64(n)
	h.mu.Unlock()
}

func (h *headBuffer) bytes() []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]byte(nil), h.buf...)
}

func (h *headBuffer) total() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}
