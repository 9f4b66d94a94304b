//go:build !unix

package worker

import "time"

// processCPU is not measured here.
func processCPU() time.Duration { return 0 }
