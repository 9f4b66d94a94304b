package supervise

import (
	"bytes"
	"os"
	"strconv"
)

// proc identifies a process by pid and start time (clock ticks since boot).
type proc struct {
	pid   int
	start uint64
}

// procStat is what the reaper needs from /proc/<pid>/stat.
type procStat struct {
	ppid  int
	start uint64
}

// readProcStat parses /proc/<pid>/stat. The command name may contain
// spaces and parentheses, so fields are counted after the last ')'.
func readProcStat(pid int) (procStat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	return parseProcStat(b)
}

func parseProcStat(b []byte) (procStat, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, false
	}
	// After ") ": field 3 (state) is index 0, ppid (4) is 1, starttime (22) is 19.
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 {
		return procStat{}, false
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	start, err2 := strconv.ParseUint(string(f[19]), 10, 64)
	if err1 != nil || err2 != nil {
		return procStat{}, false
	}
	return procStat{ppid: ppid, start: start}, true
}

// procTree enumerates descendants, through /proc/<pid>/task/<tid>/children
// when the kernel provides it, else by scanning every /proc/<pid>/stat.
type procTree struct {
	childrenFiles bool
}

func newProcTree() procTree {
	self := strconv.Itoa(os.Getpid())
	_, err := os.Stat("/proc/" + self + "/task/" + self + "/children")
	return procTree{childrenFiles: err == nil}
}

// descendants returns every process below root, each with a parent that
// was confirmed when its start time was read.
func (t procTree) descendants(root int) []proc {
	if !t.childrenFiles {
		return scanDescendants(root)
	}
	var out []proc
	queue := []int{root}
	seen := map[int]bool{root: true}
	for len(queue) > 0 {
		parent := queue[0]
		queue = queue[1:]
		for _, c := range childrenOf(parent) {
			if seen[c] {
				continue
			}
			seen[c] = true
			st, ok := readProcStat(c)
			if !ok || st.ppid != parent {
				continue // exited, or the pid was recycled outside the tree
			}
			out = append(out, proc{pid: c, start: st.start})
			queue = append(queue, c)
		}
	}
	return out
}

func childrenOf(pid int) []int {
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []int
	for _, task := range tasks {
		b, err := os.ReadFile(dir + task.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range bytes.Fields(b) {
			if n, err := strconv.Atoi(string(f)); err == nil && n > 0 {
				out = append(out, n)
			}
		}
	}
	return out
}

// scanDescendants reads every process's parent and walks down from root.
func scanDescendants(root int) []proc {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	kids := map[int][]proc{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		if st, ok := readProcStat(pid); ok {
			kids[st.ppid] = append(kids[st.ppid], proc{pid: pid, start: st.start})
		}
	}
	var out []proc
	queue := []int{root}
	for len(queue) > 0 {
		parent := queue[0]
		queue = queue[1:]
		for _, c := range kids[parent] {
			out = append(out, c)
			queue = append(queue, c.pid)
		}
	}
	return out
}
