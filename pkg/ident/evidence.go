package ident

// Evidence bounds, enforced by the Worker that builds the batches, the wire
// protocol that carries them and the store that keeps them.
const (
	MaxEvidenceBatches    = 2        // batches per attempt (1 = work, 2 = cleanup)
	MaxEvidenceRecords    = 34       // records per batch and per attempt
	MaxEvidenceBatchBytes = 96 << 10 // canonical bytes per batch
)
