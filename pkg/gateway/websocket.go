package gateway

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
)

// upgrade forwards a WebSocket handshake and then both directions of
// the connection, frame bytes as they come. A grant with a budget is
// refused any upgrade (403 websocket_refused): over WebSocket a turn's
// cost would be known only from a message the provider sends when it
// pleases, and no agent needs it (Codex runs with supports_websockets =
// false). Otherwise no extension is negotiated (the client's offer is
// not forwarded and an upstream that selects one anyway is refused), so
// every frame is plain to the meter: every data message the client sends
// counts as one request (the Responses API over WebSocket sends one
// response.create per turn) and the provider's are metered like
// server-sent events.
func (g *Gateway) upgrade(w http.ResponseWriter, out *http.Request, up *upstream, gr *Grant) {
	if gr.budget != (Budget{}) {
		errWebSocket.write(w)
		return
	}
	if !gr.admit() { // the handshake itself is a request
		gr.refuse(w)
		return
	}
	resp, err := g.rt.RoundTrip(out)
	if err != nil {
		errUpstream.write(w)
		return
	}
	if resp.StatusCode == http.StatusSwitchingProtocols && len(resp.Header.Values("Sec-Websocket-Extensions")) > 0 {
		resp.Body.Close() // compressed frames the meter could not read
		errUpgrade.write(w)
		return
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer resp.Body.Close()
		if resp.StatusCode >= 300 && resp.StatusCode < 400 {
			errRedirect.write(w)
			return
		}
		copyHeaders(w.Header(), resp.Header)
		w.WriteHeader(resp.StatusCode)
		stream(w, resp, newMeter(up.Kind, resp.Header.Get("Content-Type")), gr)
		return
	}
	upConn, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		resp.Body.Close()
		errUpgrade.write(w)
		return
	}
	defer upConn.Close()
	client, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		errUpgrade.write(w)
		return
	}
	defer client.Close()
	if err := writeSwitch(brw.Writer, resp.Header); err != nil {
		return
	}
	ctx := out.Context()
	var once sync.Once
	closeBoth := func() { once.Do(func() { client.Close(); upConn.Close() }) }
	stop := context.AfterFunc(ctx, closeBoth)
	defer stop()

	done := make(chan struct{})
	go func() { // provider → client
		defer close(done)
		defer closeBoth()
		// Each message is read on its own: every turn's completion
		// reports that turn's usage.
		down := &frameReader{onMessage: func(msg []byte) bool {
			m := newMeter(up.Kind, "application/json")
			m.observeJSON(msg)
			gr.record(m.take())
			return true
		}}
		pump(client, upConn, down.feed)
	}()
	upward := &frameReader{onMessage: func([]byte) bool { return gr.admit() }}
	pump(upConn, io.MultiReader(brw.Reader, client), upward.feed) // client → provider
	closeBoth()
	<-done
}

// pump copies src to dst, showing every chunk to see first; a false
// from see ends the copy before the chunk is forwarded.
func pump(dst io.Writer, src io.Reader, see func([]byte) bool) {
	buf := make([]byte, copyBuffer)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !see(buf[:n]) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// writeSwitch writes the 101 answer with the provider's headers that
// belong to the handshake and no others.
func writeSwitch(w *bufio.Writer, h http.Header) error {
	fmt.Fprintf(w, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n")
	for k, vs := range h {
		if !strings.HasPrefix(k, "Sec-Websocket-") || k == "Sec-Websocket-Extensions" {
			continue
		}
		for _, v := range vs {
			if strings.ContainsAny(v, "\r\n") {
				continue
			}
			fmt.Fprintf(w, "%s: %s\r\n", k, v)
		}
	}
	io.WriteString(w, "\r\n")
	return w.Flush()
}

// maxMeteredMessage bounds a WebSocket message kept for the meter; a
// longer one is forwarded whole but read as empty.
const maxMeteredMessage = 4 << 20

// frameReader follows a stream of WebSocket frames (RFC 6455 5.2) as it
// passes, chunk by chunk, and calls onMessage with every complete data
// message, text or binary (unmasked; nil when it was longer than
// maxMeteredMessage). Control frames are skipped. A frame that cannot be
// parsed (a length beyond 2^62, a reserved bit set: no extension is ever
// negotiated) stops the stream: feed returns false.
type frameReader struct {
	onMessage func([]byte) bool

	hdr     []byte // the current frame's header so far
	left    uint64 // payload bytes of the current frame still to come
	inFrame bool   // the header is complete
	masked  bool
	mask    [4]byte
	pos     uint64 // payload offset, for the mask
	control bool   // the current frame is a control frame
	final   bool   // the current frame has FIN
	msgOp   byte   // opcode of the message being assembled
	msg     []byte
	over    bool
}

// feed reads one chunk; false ends the connection.
func (f *frameReader) feed(p []byte) bool {
	for len(p) > 0 {
		if !f.inFrame {
			f.hdr = append(f.hdr, p[0])
			p = p[1:]
			ok, done := f.header()
			if !ok {
				return false
			}
			if !done {
				continue
			}
			if f.left == 0 && !f.frameEnd() {
				return false
			}
			continue
		}
		n := uint64(len(p))
		if n > f.left {
			n = f.left
		}
		if !f.control && f.msgOp != 0 && !f.over {
			if uint64(len(f.msg))+n > maxMeteredMessage {
				f.over, f.msg = true, nil
			} else {
				for i := uint64(0); i < n; i++ {
					b := p[i]
					if f.masked {
						b ^= f.mask[(f.pos+i)%4]
					}
					f.msg = append(f.msg, b)
				}
			}
		}
		f.pos += n
		f.left -= n
		p = p[n:]
		if f.left == 0 && !f.frameEnd() {
			return false
		}
	}
	return true
}

// header parses f.hdr once it is whole: ok is false for a frame that
// cannot be parsed, done true once the header is complete.
func (f *frameReader) header() (ok, done bool) {
	h := f.hdr
	if h[0]&0x70 != 0 {
		return false, false // RSV1-3: an extension's frame, unreadable
	}
	if len(h) < 2 {
		return true, false
	}
	need := 2
	switch h[1] & 0x7f {
	case 126:
		need += 2
	case 127:
		need += 8
	}
	if h[1]&0x80 != 0 {
		need += 4
	}
	if len(h) < need {
		return true, false
	}
	var n uint64
	i := 2
	switch l := h[1] & 0x7f; l {
	case 126:
		n = uint64(h[2])<<8 | uint64(h[3])
		i = 4
	case 127:
		for _, b := range h[2:10] {
			n = n<<8 | uint64(b)
		}
		if n>>62 != 0 {
			return false, false
		}
		i = 10
	default:
		n = uint64(l)
	}
	f.masked = h[1]&0x80 != 0
	if f.masked {
		copy(f.mask[:], h[i:i+4])
	}
	op := h[0] & 0x0f
	f.final = h[0]&0x80 != 0
	f.control = op >= 8
	if !f.control && op != 0 {
		f.msgOp, f.msg, f.over = op, f.msg[:0], false
	}
	f.left, f.pos, f.inFrame, f.hdr = n, 0, true, f.hdr[:0]
	return true, true
}

// frameEnd finishes the current frame: a final data frame completes a
// message for onMessage.
func (f *frameReader) frameEnd() bool {
	f.inFrame = false
	if f.control || !f.final {
		return true
	}
	op := f.msgOp
	f.msgOp = 0
	if op == 0 {
		return true // a continuation without a message: nothing to count
	}
	msg := f.msg
	if f.over {
		msg = nil
	}
	ok := f.onMessage(msg)
	f.msg, f.over = f.msg[:0], false
	return ok
}
