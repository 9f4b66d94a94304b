package serve

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/plugin"
)

// FuzzServe feeds arbitrary stdin to a plugin and judges its stdout: every
// frame valid and in order, nothing at all unless stdin began with a valid
// initialize, and a complete session whenever Serve returns nil.
func FuzzServe(f *testing.F) {
	// More seeds live in testdata/fuzz/FuzzServe.
	f.Add([]byte(initLine("text", "progress", "cancel") + textLine("hello")))
	f.Add([]byte(initLine("text") + textLine("x") + cancelLine))
	f.Fuzz(func(t *testing.T, stdin []byte) {
		var out bytes.Buffer
		err := ServeWithProgress(context.Background(), bytes.NewReader(stdin), &out, []plugin.Capability{plugin.CapText},
			func(_ context.Context, req Request, progress Progress) (Result, error) {
				_ = progress(plugin.StageStarted, "go")
				return Result{Output: strings.ToUpper(req.Input)}, nil
			})

		first, _ := plugin.ReadFrame(bufio.NewReader(bytes.NewReader(stdin)))
		init, initErr := plugin.DecodeFrame(first)
		validInit := initErr == nil && init.Type == plugin.TypeInitialize
		if !validInit && out.Len() != 0 {
			t.Fatal("output after an invalid initialize")
		}
		if out.Len() == 0 {
			if err == nil {
				t.Fatal("nil error without a session")
			}
			return
		}
		s, _ := plugin.NewSession(init.ID)
		if err := s.Accept(init); err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(&out)
		for n := 0; ; n++ {
			line, rerr := plugin.ReadFrame(r)
			if rerr == io.EOF {
				break
			}
			if rerr != nil {
				t.Fatalf("plugin wrote a bad line: %v", rerr)
			}
			fr, derr := plugin.DecodeFrame(line)
			if derr != nil {
				t.Fatalf("plugin wrote an invalid frame: %v", derr)
			}
			if fr.Type.FromWorker() {
				t.Fatal("plugin wrote a Worker frame")
			}
			if n == 1 {
				// The execute frame the plugin accepted precedes its
				// second frame; replay it from stdin.
				sr := bufio.NewReader(bytes.NewReader(stdin))
				_, _ = plugin.ReadFrame(sr)
				l2, _ := plugin.ReadFrame(sr)
				exec, eerr := plugin.DecodeFrame(l2)
				if eerr != nil || s.Accept(exec) != nil {
					t.Fatal("plugin executed an invalid execute frame")
				}
			}
			if aerr := s.Accept(fr); aerr != nil {
				t.Fatalf("plugin frame out of protocol: %v", aerr)
			}
		}
		if err == nil && !s.Done() {
			t.Fatal("nil error without a terminal frame")
		}
	})
}
