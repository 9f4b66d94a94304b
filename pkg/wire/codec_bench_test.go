package wire

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// benchLease is a text lease with a policy the size of a resolved one and
// live activity selected, as the Gate sends it to a Worker that offers it.
func benchLease() Lease {
	l := testLease()
	l.Policy = json.RawMessage(`{"version":1,"kind":"text","plugin":"reference","timeout":"30s","max_attempts":3,` +
		`"retry_backoff":"1s","env":["LANG","TZ"],"limits":{"stdout_bytes":1048576,"stderr_bytes":65536,"output_bytes":65536},` +
		`"network":"none","filesystem":{"read":["/usr","/lib"],"write":[]},"` + strings.Repeat("x", 120) + `":true}`)
	l.Task = json.RawMessage(`{"input":"hello world, this is a text task of a usual size"}`)
	l.ActivityVersion = "live_activity/v1"
	return l
}

// The per-attempt codec paths: what Gate and Worker spend on each message
// outside the store (ns/op and allocs/op, for profiling).
func BenchmarkCodec(b *testing.B) {
	lease := benchLease()
	leaseMsg, err := EncodeLease(&lease)
	if err != nil {
		b.Fatal(err)
	}
	out := "HELLO WORLD, THIS IS A TEXT TASK OF A USUAL SIZE"
	res := &Result{JobID: lease.JobID, AttemptID: lease.AttemptID, Outcome: OutcomeSucceeded, Output: &out}
	resultMsg, err := EncodeResult(7, res)
	if err != nil {
		b.Fatal(err)
	}
	var enc LeaseEncoder
	task := []byte(`{"input":"hello world, this is a text task of a usual size"}`)
	for _, c := range []struct {
		name string
		f    func() error
	}{
		{"EncodeLease", func() error { _, err := EncodeLease(&lease); return err }},
		{"LeaseEncoder", func() error { _, err := enc.Encode(&lease); return err }},
		{"DecodeLease", func() error { _, err := Decode(leaseMsg); return err }},
		{"EncodeResult", func() error { _, err := EncodeResult(7, res); return err }},
		{"DecodeResult", func() error { _, err := Decode(resultMsg); return err }},
		{"EncodeAck", func() error { _, err := EncodeAck(7, time.Time{}); return err }},
		{"ParseTask", func() error { _, err := ParseTask(task); return err }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if err := c.f(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
