// Command fakeplugin is a scripted protocol v1 plugin for the host tests:
// its first argument names a scenario, many of which break a rule on
// purpose. It is built without the race detector so that its timing does
// not depend on how the tests are run.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/0k-lab/agent-forge/pkg/plugin"
)

// fake is a scripted plugin: it reads real frames with pkg/plugin and
// writes raw lines, so scenarios can break any rule on purpose.
type fake struct {
	in  *bufio.Reader
	out *os.File
	id  string
}

func (f *fake) read() plugin.Frame {
	line, err := plugin.ReadFrame(f.in)
	if err != nil {
		os.Exit(41)
	}
	fr, err := plugin.DecodeFrame(line)
	if err != nil {
		os.Exit(42)
	}
	return fr
}

// waitEOF reads until stdin ends.
func (f *fake) waitEOF() { io.Copy(io.Discard, f.in) }

func (f *fake) raw(s string) { f.out.WriteString(s) }

func (f *fake) frame(typ, fields string) {
	if fields != "" {
		fields = "," + fields
	}
	f.raw(fmt.Sprintf(`{"version":"v1","id":"%s","type":"%s"%s}`+"\n", f.id, typ, fields))
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func (f *fake) initialized(caps ...string) {
	f.frame("initialized", `"capabilities":["`+strings.Join(caps, `","`)+`"]`)
}

func (f *fake) progress(seq int, text string) {
	f.frame("progress", fmt.Sprintf(`"sequence":%d,"stage":"working","text":%s`, seq, quote(text)))
}

func (f *fake) result(out string) { f.frame("result", `"output":`+quote(out)) }

func (f *fake) failure(cat string) { f.frame("failure", `"category":"`+cat+`"`) }

func hang() { time.Sleep(time.Hour) }

// start reads initialize and answers with caps, then reads execute.
func (f *fake) start(caps ...string) plugin.Frame {
	f.id = f.read().ID
	f.initialized(caps...)
	return f.read()
}

var scenarios = map[string]func(f *fake){
	"echo": func(f *fake) {
		ex := f.start("text")
		f.result(strings.ToUpper(ex.Input))
		f.waitEOF()
	},
	"env": func(f *fake) {
		f.start("text")
		f.result(strings.Join(os.Environ(), ";"))
		f.waitEOF()
	},
	"progress3": func(f *fake) {
		f.start("text", "progress")
		for i := 1; i <= 3; i++ {
			f.progress(i, "step "+strconv.Itoa(i))
		}
		f.result("done")
		f.waitEOF()
	},
	"progress-bad-seq": func(f *fake) {
		f.start("text", "progress")
		f.progress(2, "skipped one")
		f.result("x")
		f.waitEOF()
	},
	"progress-unnegotiated": func(f *fake) {
		f.start("text")
		f.progress(1, "not selected")
		f.result("x")
		f.waitEOF()
	},
	"progress-long-text": func(f *fake) {
		f.start("text", "progress")
		f.progress(1, strings.Repeat("a", plugin.ProgressTextBytes+1))
		f.result("x")
		f.waitEOF()
	},
	"progress-129": func(f *fake) {
		f.start("text", "progress")
		for i := 1; i <= plugin.ProgressFrames+1; i++ {
			f.progress(i, "tick")
		}
		f.result("x")
		f.waitEOF()
	},
	"wrong-id": func(f *fake) {
		f.id = f.read().ID
		f.id = strings.Repeat("0", 32)
		f.initialized("text")
		f.waitEOF()
	},
	"unoffered": func(f *fake) {
		f.id = f.read().ID
		f.initialized("text", "workspace_edit")
		f.waitEOF()
	},
	"no-op-cap": func(f *fake) {
		f.id = f.read().ID
		f.initialized("workspace_edit")
		f.waitEOF()
	},
	"crlf": func(f *fake) {
		f.id = f.read().ID
		f.raw(`{"version":"v1","id":"` + f.id + `","type":"initialized","capabilities":["text"]}` + "\r\n")
		f.waitEOF()
	},
	"oversized": func(f *fake) {
		f.start("text")
		f.result(strings.Repeat("a", plugin.FrameBytes))
		f.waitEOF()
	},
	"sends-cancel": func(f *fake) {
		f.start("text", "cancel")
		f.frame("cancel", "")
		f.result("X")
		f.waitEOF()
	},
	// A line one byte over the frame limit, then silence with the pipe open.
	"unterminated-oversize": func(f *fake) {
		f.start("text")
		f.raw(strings.Repeat("a", plugin.FrameBytes+1))
		f.waitEOF()
	},
	"trailing-frame": func(f *fake) {
		f.start("text")
		f.result("one")
		f.result("two")
		f.waitEOF()
	},
	"trailing-bytes": func(f *fake) {
		f.start("text")
		f.result("one")
		f.raw("x")
		f.waitEOF()
	},
	"nonzero-exit": func(f *fake) {
		f.start("text")
		f.result("one")
		f.waitEOF()
		os.Exit(3)
	},
	"no-exit": func(f *fake) {
		f.start("text")
		f.result("one")
		f.waitEOF()
		hang()
	},
	"failure": func(f *fake) {
		f.start("text")
		f.failure("execution_failed")
		f.waitEOF()
	},
	"early-exit": func(f *fake) {
		f.start("text")
		os.Exit(0)
	},
	"exit-before-init": func(f *fake) { os.Exit(0) },
	"secret": func(f *fake) {
		os.Stderr.WriteString("SECRET-STDERR\n")
		f.raw("SECRET-STDOUT\n")
		f.waitEOF()
	},
	"hang-init": func(f *fake) {
		f.read()
		hang()
	},
	"hang": func(f *fake) {
		f.start("text", "progress", "cancel")
		f.waitEOF()
		hang()
	},
	"cancel-success": func(f *fake) {
		f.start("text", "progress", "cancel")
		f.progress(1, "working")
		if f.read().Type == plugin.TypeCancel {
			f.result("finished anyway")
		}
		f.waitEOF()
	},
	"cancel-failure": func(f *fake) {
		f.start("text", "progress", "cancel")
		f.progress(1, "working")
		if f.read().Type == plugin.TypeCancel {
			f.failure("cancelled")
		}
		f.waitEOF()
	},
	"cancel-garbage": func(f *fake) {
		f.start("text", "progress", "cancel")
		f.progress(1, "working")
		f.read()
		f.raw("garbage\n")
		f.waitEOF()
		os.Exit(9)
	},
	"cancel-ignored": func(f *fake) {
		f.start("text", "progress", "cancel")
		f.progress(1, "working")
		f.read()
		hang()
	},
	"no-cancel-cap": func(f *fake) {
		f.start("text", "progress")
		f.progress(1, "working")
		f.waitEOF()
		hang()
	},
	"limit-live": func(f *fake) {
		f.start("text")
		os.Stderr.Write(make([]byte, 2<<20))
		hang()
	},
	"limit-stdout": func(f *fake) {
		f.start("text")
		f.raw(strings.Repeat("x", 3000))
		hang()
	},
	"limit-after-cancel": func(f *fake) {
		f.start("text", "progress", "cancel")
		f.progress(1, "working")
		f.read()
		os.Stderr.Write(make([]byte, 2<<20))
		hang()
	},
	"workspace": func(f *fake) {
		f.start("workspace_edit", "commit_subject", "agent_report")
		f.frame("result", `"commit_subject":"feat: edit","summary":"did it","changes":["a.go"]`)
		f.waitEOF()
	},
	"workspace-unnegotiated-report": func(f *fake) {
		f.start("workspace_edit")
		f.frame("result", `"summary":"did it","changes":["a.go"]`)
		f.waitEOF()
	},
	// setsid leaves a grandchild in its own session, records its pid and
	// start time, and completes the session normally.
	"setsid": func(f *fake) {
		f.start("text")
		c := exec.Command("/proc/self/exe", "sleeper")
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := c.Start(); err != nil {
			os.Exit(43)
		}
		stat, _ := os.ReadFile("/proc/" + strconv.Itoa(c.Process.Pid) + "/stat")
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		os.WriteFile(os.Getenv("FAKE_DIR")+"/pid", []byte(strconv.Itoa(c.Process.Pid)+" "+fields[19]), 0o600)
		f.result("left a grandchild")
		f.waitEOF()
	},
	"sleeper": func(f *fake) { hang() },
	// forger leaves a process in a session of its own that holds stdout,
	// and exits 0 without a terminal frame; that process sends the result
	// the moment the plugin has exited, and keeps stdout (forgery).
	"forger": func(f *fake) {
		f.start("text")
		self, _, e := syscall.Syscall(434, uintptr(os.Getpid()), 0, 0) // pidfd_open: readable once this process exits
		if e != 0 {
			os.Exit(44)
		}
		ready, readyW, err := os.Pipe()
		if err != nil {
			os.Exit(43)
		}
		c := exec.Command("/proc/self/exe", "forgery")
		c.Stdout = os.Stdout
		c.ExtraFiles = []*os.File{os.NewFile(self, "pidfd"), readyW}
		c.Env = []string{"FAKE_ID=" + f.id}
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := c.Start(); err != nil {
			os.Exit(43)
		}
		readyW.Close()
		ready.Read(make([]byte, 1)) // the forgery waits for this process's end now
	},
	"forgery": func(f *fake) {
		f.id = os.Getenv("FAKE_ID")
		var pfd [8]byte // struct pollfd: fd 3, events POLLIN
		pfd[0], pfd[4] = 3, 1
		syscall.Close(4) // ready
		syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd[0])), 1, 0, 0, 0, 0)
		f.result("forged")
		hang() // holding stdout until it is killed
	},
}

func main() {
	if len(os.Args) != 2 {
		os.Exit(2)
	}
	s, ok := scenarios[os.Args[1]]
	if !ok {
		os.Exit(40)
	}
	s(&fake{in: bufio.NewReader(os.Stdin), out: os.Stdout})
	os.Exit(0)
}
