// Package supervise runs bounded child processes: plugins now, scoped checks
// and git later.
//
// A child gets exactly the argv, environment and working directory the
// caller passes (never the parent's environment implicitly), its own process
// group, a private bounded stderr buffer that is never forwarded anywhere,
// and one combined output budget over everything it writes to stdout and
// stderr. Exceeding the budget, a timeout or the end of the caller's context
// stops the child: SIGTERM first, SIGKILL to its whole process group after
// a grace period. When the group leader exits, any member still left in its
// group is killed before the leader is reaped.
//
// # Reaper mode (Linux)
//
// Descendants that leave the process group (setsid) escape group signals.
// On Linux a Command may therefore name a reaper: a binary that, when its
// first argument is ReaperArg, runs ReaperMain instead of its usual main.
// The reaper marks itself a child subreaper (PR_SET_CHILD_SUBREAPER),
// starts the real program with the inherited stdin, stdout and stderr and
// exactly the Command's Env (supervise gives the reaper itself
// GOMAXPROCS=1 when Env does not set GOMAXPROCS, which makes its Go
// runtime start cheaper; the reaper strips it again),
// forwards SIGTERM, SIGINT, SIGHUP and SIGQUIT to it, and waits for it.
// After the program exits, for whatever reason, the reaper finds every
// remaining descendant (ordinary ones still attached to a living parent and
// setsid ones reparented to the reaper), sends SIGTERM and SIGCONT, then
// SIGKILL after a short grace, reaps them, and exits with the program's
// status (128+N when a signal N ended it). When the reaper has no child
// left at that point there is no descendant left anywhere (each one either
// has a living parent below the reaper or was reparented to it), so it
// exits at once: no /proc scan, no signal, no grace period. Every signal to a process that is
// not the reaper's own unreaped child goes through a pidfd whose identity
// is confirmed by the process start time, so a recycled PID is never hit.
// The whole cleanup is bounded in time. The reaper also gets SIGTERM when
// its caller dies (parent-death signal), so even a SIGKILLed caller leaves
// no program or descendant behind.
//
// The reaper is an explicit mode of the calling binary. Every binary that
// runs plugins dispatches it first thing in main:
//
//	func main() {
//		if len(os.Args) > 1 && os.Args[1] == supervise.ReaperArg {
//			os.Exit(supervise.ReaperMain(os.Args[2:]))
//		}
//		...
//	}
//
// and passes its own path (os.Executable) as Command.Reaper.
//
// This is best-effort cleanup for trusted same-UID programs, not
// containment: without a cgroup or PID namespace a deliberately hostile
// process can escape. On other Unix systems Reaper is ignored and only the
// process group is cleaned up.
//
// Errors never contain argv, paths, environment values or child output.
package supervise
