package gateway

import (
	"bytes"
	"encoding/json"
	"mime"
)

// Bounds of the meter: a server-sent event line or a JSON body longer
// than these is forwarded whole but not read for usage.
const (
	maxMeteredLine = 4 << 20
	maxMeteredBody = 8 << 20
	maxTokenCount  = 1 << 40 // larger reported counts are clamped
)

// meter reads one response as it passes and keeps the largest count of
// each kind of token any usage object in it reported: the providers'
// counts are cumulative within a response (Anthropic's message_start
// then message_delta, Gemini's chunks), and the Responses API reports
// once, in response.completed (or the body).
type meter struct {
	kind  Kind
	sse   bool
	buf   []byte
	over  bool
	found Usage
	taken Usage // the part of found take returned
	seen  bool  // a usage object was read
}

func newMeter(k Kind, contentType string) *meter {
	mt, _, _ := mime.ParseMediaType(contentType)
	return &meter{kind: k, sse: mt == "text/event-stream"}
}

// Write takes the next bytes of the body.
func (m *meter) Write(p []byte) {
	if !m.sse {
		if !m.over {
			if len(m.buf)+len(p) > maxMeteredBody {
				m.over, m.buf = true, nil
			} else {
				m.buf = append(m.buf, p...)
			}
		}
		return
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			m.appendLine(p)
			return
		}
		m.appendLine(p[:i])
		if !m.over {
			m.line(bytes.TrimSuffix(m.buf, []byte("\r")))
		}
		m.buf, m.over = m.buf[:0], false
		p = p[i+1:]
	}
}

func (m *meter) appendLine(p []byte) {
	if m.over {
		return
	}
	if len(m.buf)+len(p) > maxMeteredLine {
		m.over, m.buf = true, m.buf[:0]
		return
	}
	m.buf = append(m.buf, p...)
}

// line reads one event-stream line: only data lines carry usage.
func (m *meter) line(l []byte) {
	data, ok := bytes.CutPrefix(l, []byte("data:"))
	if !ok {
		return
	}
	m.observeJSON(bytes.TrimPrefix(data, []byte(" ")))
}

// finish reads a non-streamed body once it is complete.
func (m *meter) finish() {
	if !m.sse && !m.over && len(m.buf) > 0 {
		m.observeJSON(m.buf)
		m.buf = nil
	}
}

// take returns what was found since the last take.
func (m *meter) take() Usage {
	d := Usage{
		InputTokens:  m.found.InputTokens - m.taken.InputTokens,
		OutputTokens: m.found.OutputTokens - m.taken.OutputTokens,
		CachedTokens: m.found.CachedTokens - m.taken.CachedTokens,
	}
	m.taken = m.found
	return d
}

// usageDoc holds every place the three APIs put usage: the body's or an
// event's "usage", a Responses event's "response.usage", Anthropic's
// message_start "message.usage" and Gemini's "usageMetadata".
type usageDoc struct {
	Usage    *tokenCounts `json:"usage"`
	Response *struct {
		Usage *tokenCounts `json:"usage"`
	} `json:"response"`
	Message *struct {
		Usage *tokenCounts `json:"usage"`
	} `json:"message"`
	UsageMetadata *geminiCounts `json:"usageMetadata"`
}

type tokenCounts struct {
	InputTokens        int64 `json:"input_tokens"`
	OutputTokens       int64 `json:"output_tokens"`
	InputTokensDetails *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
}

type geminiCounts struct {
	PromptTokenCount        int64 `json:"promptTokenCount"`
	CandidatesTokenCount    int64 `json:"candidatesTokenCount"`
	ThoughtsTokenCount      int64 `json:"thoughtsTokenCount"`
	CachedContentTokenCount int64 `json:"cachedContentTokenCount"`
}

// observeJSON reads one JSON document (an event or a body) for usage;
// anything else is ignored. It always returns true (a frameReader
// callback).
func (m *meter) observeJSON(doc []byte) bool {
	if !bytes.Contains(doc, []byte("sage")) { // usage, usageMetadata
		return true
	}
	var d usageDoc
	if json.Unmarshal(doc, &d) != nil {
		return true
	}
	switch m.kind {
	case KindGeminiGenerateContent:
		if g := d.UsageMetadata; g != nil {
			m.keep(Usage{InputTokens: g.PromptTokenCount, OutputTokens: g.CandidatesTokenCount + g.ThoughtsTokenCount, CachedTokens: g.CachedContentTokenCount})
			m.seen = true
		}
	default:
		for _, t := range []*tokenCounts{d.Usage, responseUsage(&d), messageUsage(&d)} {
			if t != nil {
				m.keep(m.counts(t))
				m.seen = true
			}
		}
	}
	return true
}

func responseUsage(d *usageDoc) *tokenCounts {
	if d.Response == nil {
		return nil
	}
	return d.Response.Usage
}

func messageUsage(d *usageDoc) *tokenCounts {
	if d.Message == nil {
		return nil
	}
	return d.Message.Usage
}

// counts maps one usage object to Usage: the Responses API's
// input_tokens already include the cached ones; Anthropic's do not
// (cache reads and writes are counted apart).
func (m *meter) counts(t *tokenCounts) Usage {
	if m.kind == KindAnthropicMessages {
		return Usage{
			InputTokens:  t.InputTokens + t.CacheCreationInputTokens + t.CacheReadInputTokens,
			OutputTokens: t.OutputTokens,
			CachedTokens: t.CacheReadInputTokens,
		}
	}
	u := Usage{InputTokens: t.InputTokens, OutputTokens: t.OutputTokens}
	if t.InputTokensDetails != nil {
		u.CachedTokens = t.InputTokensDetails.CachedTokens
	}
	return u
}

// keep raises each count of found to u's.
func (m *meter) keep(u Usage) {
	m.found.InputTokens = max(m.found.InputTokens, clamp(u.InputTokens))
	m.found.OutputTokens = max(m.found.OutputTokens, clamp(u.OutputTokens))
	m.found.CachedTokens = max(m.found.CachedTokens, clamp(u.CachedTokens))
}

func clamp(n int64) int64 {
	return min(max(n, 0), maxTokenCount)
}
