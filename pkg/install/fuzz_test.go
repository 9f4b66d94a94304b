package install

import (
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/ident"
	"github.com/0k-lab/agent-forge/pkg/testseed"
)

// FuzzParseSums: never panics; an accepted manifest names exactly the six
// Linux archives with 64-hex digests, and errors are one line.
func FuzzParseSums(f *testing.F) {
	testseed.Add(f, "testdata/seed/sums*")
	f.Fuzz(func(t *testing.T, data []byte) {
		sums, err := ParseSums(data, "v1.0.0")
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatal("multi-line error")
			}
			return
		}
		if len(sums) != 6 {
			t.Fatalf("%d entries", len(sums))
		}
		for _, n := range manifestNames("v1.0.0") {
			if !ident.ValidSHA256(sums[n]) {
				t.Fatalf("%s digest", n)
			}
		}
	})
}

// FuzzReadArchive: never panics; an accepted archive has exactly the
// allowlisted members with their modes.
func FuzzReadArchive(f *testing.F) {
	testseed.Add(f, "testdata/seed/archive*")
	commit := strings.Repeat("a", 40)
	f.Fuzz(func(t *testing.T, data []byte) {
		ms, err := ReadArchive(data, "gate", "v1.0.0", commit)
		if err != nil {
			return
		}
		if len(ms) != 2 || ms[0].Name != "VERSION" || ms[1].Name != "forge-gate" || ms[1].Mode != 0o755 {
			t.Fatalf("accepted %v", ms)
		}
	})
}

// FuzzDecodeReceipt: never panics; an accepted receipt re-encodes to
// bytes that decode to the same receipt.
func FuzzDecodeReceipt(f *testing.F) {
	testseed.Add(f, "testdata/seed/receipt*")
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := DecodeReceipt(data)
		if err != nil {
			return
		}
		again, err := DecodeReceipt(r.Encode())
		if err != nil || string(again.Encode()) != string(r.Encode()) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

// FuzzParseArgs: never panics and never echoes an argument in its error.
func FuzzParseArgs(f *testing.F) {
	f.Add("--version\x00v1.0.0\x00--commit\x00" + strings.Repeat("a", 40) + "\x00--asset-dir\x00/a\x00--sha256sums-sha256\x00" + strings.Repeat("b", 64))
	f.Add("--upgrade\x00--enable-now\x00--run-as-root")
	f.Fuzz(func(t *testing.T, joined string) {
		args := strings.Split(joined, "\x00")
		_, err := ParseArgs(args)
		if err == nil {
			return
		}
		flags := map[string]bool{"version": true, "commit": true, "asset-dir": true, "sha256sums-sha256": true,
			"enable-now": true, "run-as-root": true, "upgrade": true}
		for _, a := range args {
			// Errors may name a flag (a flag name is not a value).
			if len(a) > 12 && !flags[strings.TrimLeft(a, "-")] && strings.Contains(err.Error(), a) {
				t.Fatal("argument echoed")
			}
		}
	})
}
