//go:build !unix

package store

import "time"

func processCPU() time.Duration { return 0 }
