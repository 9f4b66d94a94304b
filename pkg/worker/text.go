package worker

import (
	"context"
	"errors"
	"github.com/0k-lab/agent-forge/pkg/egress"
	"github.com/0k-lab/agent-forge/pkg/sandbox"
	"net/netip"
	"slices"
	"sync/atomic"

	"github.com/0k-lab/agent-forge/pkg/plugin"
	"github.com/0k-lab/agent-forge/pkg/plugin/host"
	"github.com/0k-lab/agent-forge/pkg/policy"
	"github.com/0k-lab/agent-forge/pkg/supervise"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

// TextExecutor runs text jobs: one plugin process per attempt, chosen and
// bounded by the lease's policy within this Worker's configuration.
type TextExecutor struct {
	cfg    *Config
	lookup func(string) (string, bool)
	reaper *supervise.ReaperPool
	sb     *sandboxRules // nil: no sandbox
	dirs   *runDirs
	// last is the latest policy document decoded, with its result: Gate
	// sends every text job of a pool the same document, byte for byte.
	last atomic.Pointer[decodedPolicy]
}

// decodedPolicy is a policy document and what policy.Decode made of it
// (read-only once stored).
type decodedPolicy struct {
	raw string
	pol policy.Policy
}

// policy decodes raw, or returns the decoding of the same document last
// time.
func (x *TextExecutor) policy(raw []byte) (policy.Policy, error) {
	if d := x.last.Load(); d != nil && d.raw == string(raw) {
		return d.pol, nil
	}
	pol, err := policy.Decode(raw)
	if err != nil {
		return policy.Policy{}, err
	}
	x.last.Store(&decodedPolicy{raw: string(raw), pol: pol})
	return pol, nil
}

// NewTextExecutor returns the text executor. lookupEnv (os.LookupEnv in
// production) supplies the values of allowed variables; reaper runs each
// plugin under the Linux child-subreaper wrapper (nil: none).
func NewTextExecutor(cfg *Config, lookupEnv func(string) (string, bool), reaper *supervise.ReaperPool) *TextExecutor {
	return &TextExecutor{cfg: cfg, lookup: lookupEnv, reaper: reaper, sb: newSandboxRules(cfg), dirs: &runDirs{root: cfg.RuntimeRoot, reuse: true}}
}

// Close removes the working directories kept for reuse. Call it once the
// Worker has stopped.
func (x *TextExecutor) Close() {
	x.dirs.close()
}

// Execute implements Executor.
func (x *TextExecutor) Execute(ctx context.Context, a *Attempt) Report {
	lease := a.Lease
	task, err := wire.DecodeTextTask(lease.Task)
	if err != nil {
		return Report{Code: CodeInvalidTask}
	}
	pol, err := x.policy(lease.Policy)
	if err != nil {
		return Report{Code: CodeInvalidPolicy}
	}
	inv, code := x.cfg.resolve(pol, x.lookup, a.metered())
	if code != "" {
		return Report{Code: code}
	}
	inv.useGateway(a.Grant)
	if code := inv.useEgress(); code != "" {
		return Report{Code: code}
	}
	defer inv.closeEgress()
	run, code := inv.begin(x.dirs)
	if code != "" {
		return Report{Code: code}
	}
	defer run.end()
	// Progress text stays Worker-local; only the stage feeds live activity.
	tr := a.Stages
	out, err := host.Run(ctx, run.cmd(x.reaper, x.sb, sandboxDirs{}), host.Request{
		Offer:     []plugin.Capability{plugin.CapText, plugin.CapProgress, plugin.CapCancel},
		Operation: plugin.OpText,
		Input:     task.Input,
	}, func(p host.Progress) { tr.Progress(p.Stage) })
	if err != nil {
		run.survived = host.KindOf(err) == host.KindSurvivors
		return runFailure(err)
	}
	return Report{Succeeded: true, Output: out.Output}
}

// pluginIncompatible reports whether the plugin answered failure
// incompatible: it cannot work in this environment (an agent plugin whose
// executable is missing, whose operator profile is invalid or whose
// credentials the provider refused), so another attempt here cannot help.
func pluginIncompatible(err error) bool {
	var he *host.Error
	return errors.As(err, &he) && he.Kind == host.KindFailure && he.Category == plugin.CategoryIncompatible
}

// runFailure maps a plugin runner error to a report.
func runFailure(err error) Report {
	switch host.KindOf(err) {
	case host.KindCancelled:
		return Report{Cancelled: true, Code: CodePluginFailed}
	case host.KindTimeout:
		return Report{Code: CodePluginTimeout}
	case host.KindOutputLimit:
		return Report{Code: CodePluginOutputLimit}
	case host.KindFailure:
		if pluginIncompatible(err) {
			return Report{Code: CodePluginIncompatible}
		}
		return Report{Code: CodePluginFailed}
	case host.KindSpawn:
		return Report{Code: CodePluginSpawnFailed, Cause: err.Error()}
	case host.KindRequest:
		return Report{Code: CodePluginSpawnFailed}
	case host.KindSurvivors:
		return Report{Code: CodeExecutionFailed}
	default:
		return Report{Code: CodePluginProtocolViolation}
	}
}

// invocation is one plugin run resolved from a policy and this Worker's
// configuration, before anything is started.
type invocation struct {
	cfg    *Config
	plugin Plugin
	exec   policy.Execution
	env    []string
	// connect is where the plugin's sandbox may open TCP connections
	// (the gateway, when the attempt has a grant, and its proxy):
	// nowhere else.
	connect []netip.AddrPort
	// proxy is the attempt's CONNECT proxy (egress.go), nil when its
	// policy allows no host; refusals counts what the attempt's sandboxes
	// and proxy refused.
	proxy    *egress.Proxy
	refusals *sandbox.Refusals
}

// prepare decodes the lease's policy and resolves it against the config:
// the plugin must be configured, every requested variable allowlisted, and
// every limit within its local ceiling. It fails closed with a code.
func (c *Config) prepare(rawPolicy []byte, lookup func(string) (string, bool), metered bool) (*invocation, string) {
	pol, err := policy.Decode(rawPolicy)
	if err != nil {
		return nil, CodeInvalidPolicy
	}
	return c.resolve(pol, lookup, metered)
}

// resolve is prepare for a decoded policy. metered says the attempt's
// gateway grant enforces the lease's budget (budget.go): a policy with a
// budget is refused without it.
func (c *Config) resolve(pol policy.Policy, lookup func(string) (string, bool), metered bool) (*invocation, string) {
	if pol.Budget != nil && !metered {
		return nil, CodePolicyExceedsCeiling
	}
	e := pol.Execution
	i := slices.IndexFunc(c.Plugins, func(p Plugin) bool { return p.ID == e.PluginID })
	if i < 0 {
		return nil, CodeUnknownPlugin
	}
	if !c.Ceilings.admit(e) {
		return nil, CodePolicyExceedsCeiling
	}
	env := []string{}
	for _, name := range e.Environment {
		if !slices.Contains(c.EnvironmentAllowlist, name) {
			return nil, CodeEnvironmentNotAllowed
		}
		if v, ok := lookup(name); ok {
			env = append(env, name+"="+v)
		}
	}
	return &invocation{cfg: c, plugin: c.Plugins[i], exec: e, env: env}, ""
}

// admit reports whether every limit of e is at or below its ceiling. All
// seven are checked for every kind: a Gate policy that could not run here
// in full is a configuration mismatch to surface, not to paper over.
func (c Ceilings) admit(e policy.Execution) bool {
	return e.PluginTimeout.Std() <= c.PluginTimeout &&
		e.CheckTimeout.Std() <= c.CheckTimeout &&
		e.GitTimeout.Std() <= c.GitTimeout &&
		e.CleanupTimeout.Std() <= c.CleanupTimeout &&
		e.PluginOutputBytes <= c.PluginOutputBytes &&
		e.CheckOutputBytes <= c.CheckOutputBytes &&
		e.GitOutputBytes <= c.GitOutputBytes
}

// pluginRun is a started invocation: its identity verified and its
// private runtime directory taken.
type pluginRun struct {
	*invocation
	dirs *runDirs
	dir  runDir
	// survived: processes of the plugin survived their cgroup's kill.
	survived bool
}

// begin verifies the plugin's pinned digest (before every invocation) and
// takes a private, empty working directory under runtime_root for it.
func (inv *invocation) begin(dirs *runDirs) (*pluginRun, string) {
	if inv.plugin.SHA256 != "" {
		sum, err := fileSHA256(inv.plugin.Argv[0])
		if err != nil || sum != inv.plugin.SHA256 {
			return nil, CodePluginIdentityMismatch
		}
	}
	dir, err := dirs.take()
	if err != nil {
		return nil, CodePluginSpawnFailed
	}
	return &pluginRun{invocation: inv, dirs: dirs, dir: dir}, ""
}

// end gives the runtime directory back: kept for reuse when the plugin
// left it as it was, else removed with whatever the plugin left in it;
// left alone when processes of the plugin survived (the next start's
// sweep removes it, once they are gone).
func (r *pluginRun) end() {
	if !r.survived {
		r.dirs.give(r.dir)
	}
}

// cmd is the runner command: configured argv, the resolved environment,
// the private directory, the policy's plugin limits, and the sandbox
// (sandbox.go) over the plugin's executable, its private directory and
// dirs.
func (r *pluginRun) cmd(reaper *supervise.ReaperPool, sb *sandboxRules, dirs sandboxDirs) host.Command {
	return host.Command{
		Path:        r.plugin.Argv[0],
		Args:        slices.Clone(r.plugin.Argv[1:]),
		Env:         r.env,
		Dir:         r.dir.path,
		Reaper:      reaper,
		Sandbox:     reaching(sb.policy(dirs.with(r.dir.path)), r.connect, r.refusals),
		OutputBytes: r.exec.PluginOutputBytes,
		Timeout:     r.exec.PluginTimeout.Std(),
		KillGrace:   r.exec.CleanupTimeout.Std(),
	}
}
