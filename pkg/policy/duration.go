package policy

import (
	"errors"
	"time"
)

// Duration is a time.Duration that reads and writes Go duration syntax
// ("30s", "15m") in JSON.
type Duration time.Duration

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// MarshalText writes d in Go duration syntax.
func (d Duration) MarshalText() ([]byte, error) {
	return []byte(time.Duration(d).String()), nil
}

// UnmarshalText parses Go duration syntax. The error never echoes the input.
func (d *Duration) UnmarshalText(b []byte) error {
	if len(b) == 0 || len(b) > 64 {
		return errors.New("invalid duration")
	}
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return errors.New("invalid duration")
	}
	*d = Duration(v)
	return nil
}
