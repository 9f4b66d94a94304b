package store

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/0k-lab/agent-forge/pkg/ident"
)

// AddEvidence durably binds one batch of evidence records to the fenced
// attempt. Batches are numbered from 1 and must arrive in order (at most
// ident.MaxEvidenceBatches); each record must be a JSON object (stored
// compacted); a batch holds 1..ident.MaxEvidenceRecords records and at most
// ident.MaxEvidenceBatchBytes bytes, and an attempt at most
// ident.MaxEvidenceRecords records in total. The attempt must be leased,
// bound to the lane's live generation and before its deadline. Replaying a
// recorded batch with identical records returns replayed=true and writes nothing; different
// records are ErrConflict. Evidence belongs to coding attempts only (a
// text attempt's batch is ErrInvalid), and whatever the caller checked,
// the store itself keeps raw output out: a record's top-level output must
// be "" or ident.EvidenceRedacted, each element of its args the marker, and
// no top-level key may repeat (ErrInvalid). The rest of the record schema
// belongs to the evidence contract (pkg/evidence), checked by the caller.
// candidate is the commit batch 1's records say the attempt created (""
// when none): the attempt records it, and a successful Complete must name
// it.
func (s *Store) AddEvidence(ctx context.Context, f Fence, batch int, records []json.RawMessage, candidate string, now time.Time) (replayed bool, err error) {
	if err := validFence(f); err != nil {
		return false, err
	}
	if candidate != "" && (batch != 1 || !ident.ValidSHA(candidate)) {
		return false, invalid("malformed created candidate")
	}
	if batch < 1 || batch > ident.MaxEvidenceBatches {
		return false, invalid("evidence batch number out of range")
	}
	if len(records) == 0 || len(records) > ident.MaxEvidenceRecords {
		return false, invalid("evidence batch size out of range")
	}
	compact := make([][]byte, len(records))
	total := 0
	for i, r := range records {
		c, ok := compactObject(r)
		if !ok {
			return false, invalid("evidence record is not a JSON object")
		}
		if !redactedOnly(c) {
			return false, invalid("evidence record carries unredacted output")
		}
		compact[i] = c
		total += len(c)
		if total > ident.MaxEvidenceBatchBytes {
			return false, invalid("evidence batch too large")
		}
	}
	us := now.UnixMicro()
	err = s.w.do(ctx, func(t *wtx) error {
		replayed = false
		r, err := t.activeFence(f, us)
		if err != nil {
			return err
		}
		if r.kind != KindCoding {
			return invalid("evidence for a text attempt")
		}
		if batch <= r.evBatches {
			same, err := t.sameBatch(r.jobSeq, f.AttemptID, batch, compact)
			if err != nil {
				return err
			}
			if !same {
				return ErrConflict
			}
			replayed = true
			return nil
		}
		if batch != r.evBatches+1 {
			return invalid("evidence batch out of order")
		}
		if r.evRecords+len(compact) > ident.MaxEvidenceRecords {
			return invalid("too many evidence records for the attempt")
		}
		for i, c := range compact {
			if _, err := t.exec(`INSERT INTO evidence (job_seq, attempt_id, batch, idx, record) VALUES (?, ?, ?, ?, ?)`,
				r.jobSeq, f.AttemptID, batch, i, string(c)); err != nil {
				return err
			}
		}
		return t.execFenced(`UPDATE attempts SET evidence_batches = ?, evidence_records = evidence_records + ?,
  evidence_bytes = evidence_bytes + ?, created_candidate = coalesce(?, created_candidate) WHERE `+fencedAttempt,
			append([]any{batch, len(compact), total, nullable(candidate)}, fencedArgs(r, f, us)...)...)
	})
	if err != nil {
		return false, err
	}
	return replayed, nil
}

// redactedOnly reports whether a record (a JSON object) holds no output
// but the redaction marker: its top-level output absent, "" or the marker,
// its args absent or an array of markers, no top-level key twice and no
// case variant of either name.
func redactedOnly(rec []byte) bool {
	d := json.NewDecoder(bytes.NewReader(rec))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return false
	}
	seen := map[string]bool{}
	for d.More() {
		t, err := d.Token()
		k, ok := t.(string)
		if err != nil || !ok || seen[k] {
			return false
		}
		seen[k] = true
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			return false
		}
		// A case variant of either name is what a lenient decoder would
		// read as that field: refused.
		for _, name := range []string{"output", "args"} {
			if k != name && strings.EqualFold(k, name) {
				return false
			}
		}
		switch k {
		case "output":
			var s string
			if len(v) == 0 || v[0] != '"' || json.Unmarshal(v, &s) != nil || s != "" && s != ident.EvidenceRedacted {
				return false
			}
		case "args":
			var args []json.RawMessage
			if len(v) == 0 || v[0] != '[' || json.Unmarshal(v, &args) != nil {
				return false
			}
			for _, a := range args {
				var s string
				if len(a) == 0 || a[0] != '"' || json.Unmarshal(a, &s) != nil || s != ident.EvidenceRedacted {
					return false
				}
			}
		}
	}
	return true
}

func (t *wtx) sameBatch(jobSeq int64, attemptID string, batch int, records [][]byte) (bool, error) {
	rows, err := t.query(`SELECT record FROM evidence WHERE job_seq = ? AND attempt_id = ? AND batch = ? ORDER BY idx`,
		jobSeq, attemptID, batch)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	i := 0
	for rows.Next() {
		var rec []byte
		if err := rows.Scan(&rec); err != nil {
			return false, err
		}
		if i >= len(records) || !bytes.Equal(rec, records[i]) {
			return false, nil
		}
		i++
	}
	if err := rows.Err(); err != nil {
		return false, err
	}
	return i == len(records), nil
}
