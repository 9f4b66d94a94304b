package conformance

import (
	"io"
	"strings"
	"testing"
	"time"
)

func TestPluginGetsExactlyTheGivenEnvironment(t *testing.T) {
	for _, env := range [][]string{nil, {"PATH=/usr/bin:/bin", "ONLY=this"}} {
		p, err := startProc([]string{"/usr/bin/env"}, env, time.Now)
		if err != nil {
			t.Fatal(err)
		}
		p.closeStdin()
		out, err := io.ReadAll(p.stdout)
		if err != nil {
			t.Fatal(err)
		}
		<-p.exited
		p.closeStdout()
		got := strings.Fields(string(out))
		if strings.Join(got, " ") != strings.Join(env, " ") {
			t.Errorf("env %q: plugin saw %q", env, got)
		}
		if code, sig, _ := p.exitStatus(); code != 0 || sig != 0 {
			t.Errorf("env exited %d (signal %d)", code, sig)
		}
	}
}
