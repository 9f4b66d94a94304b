package gitx

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/secretscan"
)

// BenchmarkFindSecret100MiB is the scan of a 100 MiB candidate as the
// Worker and the Gate run it: 100 changed files of 1 MiB of source-like
// text, streamed by one git cat-file --batch into a Set of three tokens.
// One op is the whole candidate (git's read and the scan).
func BenchmarkFindSecret100MiB(b *testing.B) {
	r := mustRunner(b)
	r.Timeout = 0
	dir := mustRepo(b, r)
	gitDir := filepath.Join(dir, ".git")
	unit := []byte("func main() { x := base64.StdEncoding.EncodeToString(data) // 0xDEADBEEF abc+/= %2F\n")
	var changes []Change
	var stdin strings.Builder
	for i := range 100 {
		body := append([]byte(fmt.Sprintf("file %d\n", i)), bytes.Repeat(unit, (1<<20)/len(unit))...)
		p := filepath.Join(dir, fmt.Sprintf("f%03d.go", i))
		if err := os.WriteFile(p, body, 0o644); err != nil {
			b.Fatal(err)
		}
		stdin.WriteString(p + "\n")
	}
	out, err := r.Run(context.Background(), Cmd{GitDir: gitDir, Stdin: []byte(stdin.String()), Args: []string{"hash-object", "-w", "--stdin-paths"}})
	if err != nil {
		b.Fatal(err)
	}
	for i, sha := range strings.Fields(string(out)) {
		changes = append(changes, Change{OldMode: "000000", NewMode: "100644", OldSHA: zeroOID, NewSHA: sha, Status: 'A', Path: fmt.Sprintf("f%03d.go", i)})
	}
	set, err := secretscan.New([]byte("worker-token-0123456789abcdef"), []byte("sk-ant-api03-0123456789abcdefghijklmnop"),
		[]byte("sk-proj-abcdefghijklmnop0123456789"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(100 << 20)
	b.ReportAllocs()
	for b.Loop() {
		if _, found, err := r.FindSecret(context.Background(), gitDir, changes, set); err != nil || found {
			b.Fatal(found, err)
		}
	}
}
