package secretscan

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"io"
	"testing"
)

// BenchmarkScan100MiB streams 100 MiB of text-like bytes through
// ScanReader: a Worker's Set (its token and two provider keys) and a
// Gate's (owner and four Worker tokens, an installation token and a
// 2048-bit App key). The cost of a 100 MiB candidate is one op.
func BenchmarkScan100MiB(b *testing.B) {
	worker := []string{"worker-token-0123456789abcdef", "sk-ant-api03-0123456789abcdefghijklmnop", "sk-proj-abcdefghijklmnop0123456789"}
	var gw Builder
	for _, v := range append(worker, "owner-token-0123456789abcdef", "w2-token-0123456789abcdef", "w3-token-0123456789abcdef",
		"ghs_0123456789abcdefghijABCDEFGHIJ012345") {
		gw.Add([]byte(v))
	}
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		b.Fatal(err)
	}
	gw.AddRSAKey(k)
	gate, err := gw.Set()
	if err != nil {
		b.Fatal(err)
	}
	ws := mustSet(b, worker...)
	// Source-like content: the classes the patterns use, so the
	// automaton leaves its root often.
	unit := []byte("func main() { x := base64.StdEncoding.EncodeToString(data) // 0xDEADBEEF abc+/= %2F\n")
	data := bytes.Repeat(unit, (100<<20)/len(unit)+1)[:100<<20]
	for _, c := range []struct {
		name string
		s    *Set
	}{{"worker", ws}, {"gate", gate}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				found, err := c.s.ScanReader(onlyReader{bytes.NewReader(data)})
				if err != nil || found {
					b.Fatal(found, err)
				}
			}
			b.ReportMetric(float64(len(c.s.tab)*4)/(1<<20), "table-MiB")
		})
	}
}

// onlyReader hides WriterTo, as a file or pipe would.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }
