package worker

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/0k-lab/agent-forge/pkg/wire"
)

// Errors a Binder returns besides the context's.
var (
	errEvidenceRejected = errors.New("evidence rejected")
	errEvidenceUnsent   = errors.New("evidence not sent")
)

// evidenceRequest is one batch on its way from the executor to the lane.
type evidenceRequest struct {
	batch   int
	records []json.RawMessage
	reply   chan error // buffered (1): the lane never blocks on it
}

// evidenceLink carries evidence batches from an executor goroutine to the
// lane goroutine that owns the connection, and the Gate's answers back.
// Only the lane goroutine touches pending and again.
type evidenceLink struct {
	reqs    chan evidenceRequest
	pending map[uint64]evidenceRequest
	// again holds the batches the Gate could not record (reject
	// unavailable: its disk is full, DECISIONS 20); the lane sends them
	// again at its next heartbeat.
	again []evidenceRequest
}

func newEvidenceLink() *evidenceLink {
	return &evidenceLink{reqs: make(chan evidenceRequest), pending: map[uint64]evidenceRequest{}}
}

// bind is the executor's Binder.
func (k *evidenceLink) bind(ctx context.Context, batch int, records []json.RawMessage) error {
	req := evidenceRequest{batch: batch, records: records, reply: make(chan error, 1)}
	select {
	case k.reqs <- req:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-req.reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// send writes the batch as an evidence message with seq (lane goroutine).
// It returns false when the connection failed.
func (k *evidenceLink) send(conn *wire.Conn, lease *wire.Lease, seq uint64, req evidenceRequest) bool {
	env := wire.Envelope{Type: wire.TypeEvidence, Seq: seq, Evidence: &wire.Evidence{
		JobID: lease.JobID, AttemptID: lease.AttemptID, Batch: req.batch, Records: req.records}}
	if err := conn.SendDeadline(env, time.Now().Add(sendTimeout)); err != nil {
		req.reply <- errEvidenceUnsent
		return false
	}
	k.pending[seq] = req
	return true
}

// refuse answers a request the lane cannot send (lease lost).
func (k *evidenceLink) refuse(req evidenceRequest) { req.reply <- errEvidenceUnsent }

// owns reports whether e answers a pending batch.
func (k *evidenceLink) owns(e wire.Envelope) bool {
	_, ok := k.pending[e.Seq]
	return ok && (e.Type == wire.TypeAck || e.Type == wire.TypeReject)
}

// answer delivers the ack or reject e (which owns accepted) to the
// executor and returns the reject code, if any, for the lane to judge the
// lease. A batch refused unavailable is kept to be sent again (resend):
// the executor keeps waiting.
func (k *evidenceLink) answer(e wire.Envelope) wire.RejectCode {
	req := k.pending[e.Seq]
	delete(k.pending, e.Seq)
	if e.Type == wire.TypeAck {
		req.reply <- nil
		return ""
	}
	if e.Reject.Code == wire.RejectUnavailable {
		k.again = append(k.again, req)
		return e.Reject.Code
	}
	req.reply <- errEvidenceRejected
	return e.Reject.Code
}

// resend takes the batches to send again, in their order.
func (k *evidenceLink) resend() []evidenceRequest {
	a := k.again
	k.again = nil
	return a
}

// abort fails every batch still waiting for an answer or to be sent again.
func (k *evidenceLink) abort() {
	for seq, req := range k.pending {
		req.reply <- errEvidenceUnsent
		delete(k.pending, seq)
	}
	for _, req := range k.resend() {
		req.reply <- errEvidenceUnsent
	}
}
