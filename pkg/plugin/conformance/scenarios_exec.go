package conformance

import (
	"strings"

	"github.com/0k-lab/agent-forge/pkg/plugin"
)

func payloadScenarios(op plugin.Operation) []Scenario {
	const c = "payload"
	set := func(name, key, raw string) Scenario {
		return execWith(c, name, func(_ *Request, o object) object { return o.set(key, raw) })
	}
	if op == plugin.OpText {
		return []Scenario{
			set("payload-input-over-limit", "input", str(strings.Repeat("a", plugin.TextBytes+1))),
			// 32,769 two-byte characters: under the limit in characters,
			// over it in UTF-8 bytes.
			set("payload-input-over-limit-multibyte", "input", str(strings.Repeat("é", plugin.TextBytes/2+1))),
			execWith(c, "payload-text-with-workspace", func(r *Request, o object) object {
				return o.set("workspace", str(r.Workspace))
			}),
			set("payload-text-with-instruction", "instruction", str("edit the files")),
			set("payload-text-with-timeout", "timeout_ms", "60000"),
			set("payload-text-with-output", "output", str("HELLO")),
		}
	}
	return []Scenario{
		set("payload-workspace-relative", "workspace", str("relative/workspace")),
		set("payload-workspace-empty", "workspace", str("")),
		set("payload-timeout-zero", "timeout_ms", "0"),
		set("payload-timeout-negative", "timeout_ms", "-1"),
		set("payload-timeout-fraction", "timeout_ms", "1.5"),
		set("payload-timeout-float-integral", "timeout_ms", "60000.0"),
		set("payload-timeout-string", "timeout_ms", `"60000"`),
		set("payload-timeout-bool", "timeout_ms", "true"),
		set("payload-workspace-with-input", "input", str("hello")),
		set("payload-workspace-with-output", "output", str("HELLO")),
		execWith(c, "payload-missing-workspace", func(_ *Request, o object) object { return o.drop("workspace") }),
		execWith(c, "payload-missing-timeout", func(_ *Request, o object) object { return o.drop("timeout_ms") }),
	}
}

func orderScenarios(op plugin.Operation) []Scenario {
	const c = "order"
	cancel := func(r *Request) string { return header(r.ID, plugin.TypeCancel).line() }
	initialized := func(r *Request) string {
		return header(r.ID, plugin.TypeInitialized).set("capabilities", caps(op.Capability())).line()
	}
	progress := func(r *Request) string {
		return header(r.ID, plugin.TypeProgress).
			set("sequence", "1").set("stage", str(string(plugin.StageStarted))).set("text", str("x")).line()
	}
	result := func(r *Request) string {
		f := header(r.ID, plugin.TypeResult)
		if r.Operation == plugin.OpText {
			return f.set("output", str("HELLO")).line()
		}
		return f.set("commit_subject", str("feat: edit")).line()
	}
	failure := func(r *Request) string {
		return header(r.ID, plugin.TypeFailure).set("category", str(string(plugin.CategoryExecutionFailed))).line()
	}
	execute := func(r *Request) string { return r.execute().line() }
	late := func(name string, offer []plugin.Capability, requires plugin.Capability, b func(r *Request) string) Scenario {
		return Scenario{Name: name, Class: c, Expect: ExpectLateReject, Offer: offer, Requires: requires, Bytes: b}
	}
	return []Scenario{
		onInit(c, "order-execute-first", func(r *Request) string { return execute(r) + r.initialize().line() }),
		onInit(c, "order-initialized-first", func(r *Request) string { return initialized(r) + r.initialize().line() }),
		onInit(c, "order-cancel-first", func(r *Request) string { return cancel(r) + r.initialize().line() }),
		onExec(c, "order-second-initialize", func(r *Request) string { return r.initialize().line() + execute(r) }),
		onExec(c, "order-initialized-from-worker", func(r *Request) string { return initialized(r) + execute(r) }),
		onExec(c, "order-progress-from-worker", func(r *Request) string { return progress(r) + execute(r) }),
		onExec(c, "order-result-from-worker", func(r *Request) string { return result(r) + execute(r) }),
		onExec(c, "order-failure-from-worker", func(r *Request) string { return failure(r) + execute(r) }),
		onExec(c, "order-cancel-before-execute", func(r *Request) string { return cancel(r) + execute(r) }),
		late("order-second-execute", nil, "", func(r *Request) string { return execute(r) + execute(r) }),
		late("order-initialize-after-execute", nil, "", func(r *Request) string {
			return execute(r) + r.initialize().line()
		}),
		late("order-cancel-not-negotiated", []plugin.Capability{op.Capability()}, "", func(r *Request) string {
			return execute(r) + cancel(r)
		}),
		late("order-second-cancel", nil, plugin.CapCancel, func(r *Request) string {
			return execute(r) + cancel(r) + cancel(r)
		}),
	}
}
