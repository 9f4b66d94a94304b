package supervise

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
)

func TestParseProcStat(t *testing.T) {
	rest := " S 42 1 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 987654 0 0"
	cases := []struct {
		name string
		in   string
		ok   bool
	}{
		{"plain", "100 (sleep)" + rest, true},
		{"spaces and parens in name", "100 (a) (b c)" + rest, true},
		{"no paren", "100 sleep" + rest, false},
		{"short", "100 (x) S 42", false},
		{"bad ppid", "100 (x) S x 1 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 987654", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, ok := parseProcStat([]byte(c.in))
			if ok != c.ok {
				t.Fatalf("ok = %v, want %v", ok, c.ok)
			}
			if ok && (st.ppid != 42 || st.start != 987654) {
				t.Fatalf("stat = %+v", st)
			}
		})
	}
}

func TestReadProcStatSelf(t *testing.T) {
	st, ok := readProcStat(os.Getpid())
	if !ok || st.ppid != os.Getppid() || st.start == 0 {
		t.Fatalf("stat = %+v, %v", st, ok)
	}
}

func TestDescendantsBothWaysAgree(t *testing.T) {
	// The test process's own parent sees it as a descendant either way.
	parent := os.Getppid()
	for _, tree := range []procTree{{childrenFiles: true}, {childrenFiles: false}} {
		found := false
		for _, d := range tree.descendants(parent) {
			if d.pid == os.Getpid() {
				found = true
			}
		}
		if !found {
			t.Errorf("childrenFiles=%v: pid %s not found below its parent", tree.childrenFiles, strconv.Itoa(os.Getpid()))
		}
	}
}

func FuzzParseProcStat(f *testing.F) {
	f.Add([]byte("1 (init) S 0 1 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0"))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, ok := parseProcStat(b)
		if !ok && st != (procStat{}) {
			t.Fatal("value returned with failure")
		}
	})
}

func TestSignalIdentifiedChecksStartTime(t *testing.T) {
	cmd := exec.Command("sleep", "1000")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan *os.ProcessState, 1)
	go func() {
		st, _ := cmd.Process.Wait()
		exited <- st
	}()
	st, ok := readProcStat(cmd.Process.Pid)
	if !ok || st.ppid != os.Getpid() {
		t.Fatalf("stat = %+v, %v", st, ok)
	}
	found := false
	for _, d := range newProcTree().descendants(os.Getpid()) {
		found = found || d == proc{pid: cmd.Process.Pid, start: st.start}
	}
	if !found {
		t.Fatal("child not among the descendants")
	}
	// A different start time means a recycled pid: no signal may be sent.
	// Had this SIGKILL gone through, the exit would report SIGKILL whatever
	// follows, since the kernel applies a pending SIGKILL first.
	signalIdentified(proc{pid: cmd.Process.Pid, start: st.start + 1}, syscall.SIGKILL)
	signalIdentified(proc{pid: cmd.Process.Pid, start: st.start}, syscall.SIGTERM)
	if ps := <-exited; ps.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
		t.Fatalf("exit = %v, want SIGTERM only", ps)
	}
}
