package main

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

// The survivor try: processes that outlive their invocation. The agent
// leaves survivorChains chains of setsid hoppers behind. Each waits, idle,
// until the agent (the plugin or the check) has exited, then hops for
// survivorHold seconds (each process forks its successor, which makes
// itself a session of its own, and exits at once: a chain is never the
// same process for long, and a walk of /proc does not keep up with it),
// then reports itself to HOSTILE_REPORT and ends. A line from a chain is
// a process that outlived its invocation: the try itself counts as
// tried, every such line as reached. (Unconfined, the reaper's sweep
// alone catches four chains of python hoppers most of the time; the 64
// of pkg/supervise's TestContainedHoppersAllDie beat it.)
const (
	survivorChains = 4
	survivorHold   = "1"
)

// hopper is the chains' program (python3: a Go program cannot fork
// without exec): argv is ADDR WHO LAYOUT CHAINS HOLD AGENT_PID.
const hopper = `import json, os, select, socket, sys, time
addr, who, layout, chains, hold = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
agent = os.pidfd_open(int(sys.argv[6]))
def chain():
    p = select.poll()
    p.register(agent, select.POLLIN)
    p.poll()
    end = time.time() + hold
    while time.time() < end:
        if os.fork():
            os._exit(0)
        os.setsid()
    t = {"who": who, "kind": "survivor", "target": "setsid hoppers alive after the invocation", "ok": True}
    if layout:
        t["layout"] = layout
    c = socket.socket(socket.AF_UNIX)
    c.settimeout(5)
    c.connect(addr)
    c.sendall((json.dumps(t, separators=(",", ":")) + "\n").encode())
    c.close()
    os._exit(0)
for _ in range(chains):
    if os.fork() == 0:
        os.setsid()
        chain()
`

func (a *agent) probeSurvivor() {
	const python = "/usr/bin/python3"
	addr := os.Getenv("HOSTILE_REPORT")
	if addr == "" {
		return
	}
	if _, err := os.Stat(python); err != nil {
		return
	}
	a.add("survivor", strconv.Itoa(survivorChains)+" chains of setsid hoppers", false, nil)
	c := exec.Command(python, "-c", hopper, addr, a.who, a.layout, strconv.Itoa(survivorChains), survivorHold, strconv.Itoa(a.self))
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if c.Start() == nil {
		c.Wait() // the starter exits at once, leaving the chains
	}
}
