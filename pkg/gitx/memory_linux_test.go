package gitx

import (
	"bytes"
	"context"
	"strings"
	"syscall"
	"testing"
)

// A Runner's MemoryBytes holds for git from its start, and a pack whose
// one delta declares 1 GiB makes index-pack fail at once, out of memory,
// instead of holding 1 GiB resident (6 s here without the bound).
func TestRunnerMemoryBytes(t *testing.T) {
	r := mustRunner(t)
	r.MemoryBytes = 256 << 20
	ctx := context.Background()
	out, err := r.Run(ctx, Cmd{Args: []string{"-c", "alias.limits=!cat /proc/self/limits", "limits"}})
	if err != nil {
		t.Fatal(err)
	}
	var data string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "Max data size") {
			data = strings.Join(strings.Fields(line)[3:5], " ")
		}
	}
	if data != "268435456 268435456" {
		t.Fatalf("git's data limit (soft, hard): %q", data)
	}

	var b packBuilder
	base := b.whole(packBlob, make([]byte, 64<<10))
	b.ofs(base, copyDelta(64<<10, 64<<10, 1<<14-1))
	pack := b.bytes()
	repo := t.TempDir()
	if _, err := r.Run(ctx, Cmd{Args: []string{"init", "-q", "--bare", repo}}); err != nil {
		t.Fatal(err)
	}
	var before, after syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &before); err != nil || before.Maxrss >= 128<<10 {
		t.Fatalf("children's peak RSS before: %d KiB %v (cannot measure the bound)", before.Maxrss, err)
	}
	_, err = r.Run(ctx, Cmd{GitDir: repo, StdinFrom: bytes.NewReader(pack), Args: []string{"-c", "pack.threads=1", "index-pack", "--stdin"}})
	if !OutOfMemory(err) {
		t.Fatalf("index-pack of a 1 GiB delta under 256 MiB: %v", err)
	}
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &after); err != nil || after.Maxrss >= 128<<10 {
		t.Fatalf("index-pack's peak RSS: %d KiB %v", after.Maxrss, err)
	}
	t.Logf("children's peak RSS %d KiB before, %d KiB after", before.Maxrss, after.Maxrss)
	if OutOfMemory(&Error{Op: "index-pack", Reason: "exit status", Code: 128, output: []byte("fatal: Out of memory"), errAt: 20}) {
		t.Fatal("stdout counted as git's report")
	}
}
