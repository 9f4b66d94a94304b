package browsertest

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/strictjson"
)

// FuzzReadMessage: splitting a DevTools stream never panics, every message
// is NUL-free and bounded, and the messages rejoin to the stream's prefix.
func FuzzReadMessage(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join("testdata", "seed", "*.bin"))
	if len(paths) == 0 {
		f.Fatal("no seeds")
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, stream []byte) {
		br := bufio.NewReaderSize(bytes.NewReader(stream), 16)
		var joined []byte
		for {
			msg, err := readMessage(br)
			if err != nil {
				break
			}
			if bytes.IndexByte(msg, 0) >= 0 || len(msg) > maxMessageBytes {
				t.Fatal("message contains NUL or is too large")
			}
			joined = append(append(joined, msg...), 0)
			var env envelope
			_ = strictjson.Decode(msg, &env) // must not panic
		}
		if !bytes.HasPrefix(stream, joined) {
			t.Fatal("messages do not rejoin to the stream")
		}
	})
}
