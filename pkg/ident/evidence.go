package ident

// Evidence bounds, enforced by the Worker that builds the batches, the wire
// protocol that carries them and the store that keeps them.
const (
	MaxEvidenceBatches    = 2        // batches per attempt (1 = work, 2 = cleanup)
	MaxEvidenceRecords    = 35       // records per batch and per attempt
	MaxEvidenceBatchBytes = 96 << 10 // canonical bytes per batch
)

// EvidenceRedacted is the only non-empty value an evidence record's output,
// and each element of its args, may hold: the Worker writes it in place of
// any output and argument, and the store refuses anything else.
const EvidenceRedacted = "[REDACTED]"
