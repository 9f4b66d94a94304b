package supervise_test

import (
	"context"
	"fmt"
	"os"

	"github.com/0k-lab/agent-forge/pkg/supervise"
)

// orphanHelperEnv makes the test binary act as a caller that starts a
// program under the reaper, prints the reaper's, the program's and its
// descendants' pids, and then blocks until it is killed.
const orphanHelperEnv = "FORGE_SUPERVISE_ORPHAN_HELPER"

// orphanScript leaves an ordinary and a setsid child, prints every pid,
// and never reads stdin (so the caller's death is its only way out).
const orphanScript = `setsid sh -c 'echo $$ > "$0.s"; exec sleep 1000' "$D/p" &
sh -c 'echo $$ > "$0.o"; exec sleep 1000' "$D/p" &
while [ ! -s "$D/p.s" ] || [ ! -s "$D/p.o" ]; do :; done
echo "$$ $(cat "$D/p.s") $(cat "$D/p.o")"
exec sleep 1000`

func orphanHelper(dir string) int {
	self, err := os.Executable()
	if err != nil {
		return 1
	}
	p, err := supervise.Start(context.Background(), supervise.Command{
		Path:        "/bin/sh",
		Args:        []string{"-c", orphanScript},
		Env:         []string{"PATH=" + os.Getenv("PATH"), "D=" + dir},
		OutputLimit: 1 << 20,
		Reaper:      supervise.NewReaperPool(self),
	})
	if err != nil {
		return 1
	}
	var line [256]byte
	n, _ := p.Stdout().Read(line[:])
	fmt.Printf("%d %s", supervise.ReaperPid(p), line[:n])
	select {}
}
