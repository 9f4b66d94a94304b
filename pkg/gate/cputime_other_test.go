//go:build !unix

package gate

import "time"

func processCPU() time.Duration { return 0 }
