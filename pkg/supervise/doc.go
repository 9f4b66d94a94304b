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
// On Linux a Command may therefore name a ReaperPool: long-lived reaper
// processes, each started from a binary that, when its first argument is
// ReaperArg, runs ReaperMain instead of its usual main. A reaper marks
// itself a child subreaper (PR_SET_CHILD_SUBREAPER) and then runs one
// child at a time for supervise, driven by small messages on a private
// socket pair: supervise sends the argv, the exact environment, the
// working directory and the child's stdin, stdout and stderr (as passed
// descriptors); the reaper starts the child in its own process group, with
// SIGKILL as its parent-death signal, and answers with its pid or with
// the errno of a failed start (so a bad interpreter is a start error, as
// without a reaper). Terminate and Kill become messages that make the
// reaper signal the child's group while it is still unreaped.
//
// After the child exits, for whatever reason, the reaper kills what is
// left of its group, reaps it, and sweeps every remaining descendant
// (ordinary ones still attached to a living parent and setsid ones
// reparented to the reaper): SIGTERM and SIGCONT, SIGKILL after a short
// grace, reaping them, all bounded in time; then it reports the child's
// exit. When the reaper has no child left after the reap there is no
// descendant anywhere (each one either has a living parent below the
// reaper or was reparented to it), so the sweep costs one wait4 call: no
// /proc scan, no signal, no grace period. Every signal to a process that
// is not the reaper's own unreaped child goes through a pidfd whose
// identity is confirmed by the process start time, so a recycled PID is
// never hit. A reaper whose sweep ran out of time is retired rather than
// reused, so leftovers are never blamed on the next child.
//
// Keeping the reaper alive between children matters because the reaper
// is a Go program: starting one per child doubled the process starts of
// every plugin invocation. When supervise's end of the socket closes
// (ReaperPool.Close, or the caller dies, even by SIGKILL), the reaper
// stops its child if it has one (SIGTERM, SIGKILL after a grace), sweeps,
// and exits, so a crashed caller leaves no program or descendant behind.
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
// and passes NewReaperPool(path) as Command.Reaper, with the path from
// Self: /proc/self/exe on Linux, so that reapers run the caller's own
// binary even after an upgrade replaced its file (the messages are
// private to one build of this package).
//
// The sweep is best effort: a deliberately hostile process (a chain of
// setsid processes that keep forking a successor) outruns it. Containment
// is the kernel's: a pool given a cgroup v2 subtree (ReaperPool.Contain,
// Cgroups; DelegatedCgroups for a process's own delegated cgroup) starts
// every sandboxed program in a cgroup of its own, created for it: the
// reaper moves itself into that cgroup, forks the program, and moves
// itself back, and once the program has ended it writes cgroup.kill (the
// kernel kills every process in the cgroup at once, forks included) and
// waits, bounded, until the cgroup is empty, before it reports the end;
// supervise then removes the cgroup. Processes that survive the wait make
// Wait return ErrSurvivors, and Process.StdoutHeld says whether one of
// them held the program's stdout when it ended. A Command with Sandbox
// set starts in that Landlock policy
// (pkg/sandbox). The reaper opens the program once (sandbox.OpenProgram;
// or it is sent the file the caller opened, Command.Program),
// restricts a fresh OS thread it locks for the one program (a domain
// cannot be lifted, and the reaper serves many programs) with the
// policy and a rule on that opened file, forks and execs from it (a
// binary through the opened file), and lets that thread wait for the
// program, whose parent-death signal follows it; a shared read layer,
// when the policy has one, is built once per reaper. Sandboxed programs
// start only from guarded reapers: once, before its first program, such
// a reaper puts all its threads under the sandbox's metadata filter
// (sandbox.GuardProcess), which every program it starts inherits, and
// sends the filter's listener to the pool, which serves it in the
// caller's process (sandbox.Serve), armed with the running program's
// policy until the reaper reports it reaped and swept. Every reaper runs
// in a session of its own, without a controlling terminal, so no program
// has one to reach the operator through.
// The reaper itself is non-dumpable: it sees every program's environment.
// On other Unix systems Reaper is ignored and only the process group is
// cleaned up; a Sandbox then fails the start.
//
// Errors never contain argv, paths, environment values or child output.
package supervise
