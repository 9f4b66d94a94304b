package conformance

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/supervise"
)

func TestPluginGetsExactlyTheGivenEnvironment(t *testing.T) {
	for _, reaper := range []*supervise.ReaperPool{nil, selfReaper(t)} {
		for _, env := range [][]string{nil, {"PATH=/usr/bin:/bin", "ONLY=this"}} {
			p, err := startProc([]string{"/usr/bin/env"}, env, reaper, time.Now)
			if err != nil {
				t.Fatal(err)
			}
			p.closeStdin()
			out, err := io.ReadAll(p.stdout)
			if err != nil {
				t.Fatal(err)
			}
			<-p.exited
			p.stop()
			got := strings.Fields(string(out))
			if strings.Join(got, " ") != strings.Join(env, " ") {
				t.Errorf("env %q (reaper %t): plugin saw %q", env, reaper != nil, got)
			}
			if code, sig, _ := p.exitStatus(); code != 0 || sig != 0 {
				t.Errorf("env exited %d (signal %d)", code, sig)
			}
		}
	}
}
