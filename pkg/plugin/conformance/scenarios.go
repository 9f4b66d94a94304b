package conformance

import (
	"strings"

	"github.com/0k-lab/agent-forge/pkg/plugin"
)

// Scenarios returns the conformance table for a plugin run with operation
// op, valid sessions first. Names are unique.
func Scenarios(op plugin.Operation) []Scenario {
	var s []Scenario
	s = append(s, sessionScenarios(op)...)
	s = append(s, framingScenarios()...)
	s = append(s, idScenarios()...)
	s = append(s, fieldScenarios()...)
	s = append(s, typeScenarios()...)
	s = append(s, capabilityScenarios()...)
	s = append(s, limitsScenarios()...)
	s = append(s, versionScenarios()...)
	s = append(s, operationScenarios(op)...)
	s = append(s, payloadScenarios(op)...)
	s = append(s, orderScenarios(op)...)
	return s
}

// onInit is an invalid-initialization scenario.
func onInit(class, name string, b func(r *Request) string) Scenario {
	return Scenario{Name: name, Class: class, Expect: ExpectSilentExit, Bytes: b}
}

// onExec is an invalid-execution scenario.
func onExec(class, name string, b func(r *Request) string) Scenario {
	return Scenario{Name: name, Class: class, Expect: ExpectInitializedExit, Bytes: b}
}

// initWith is an invalid-initialization scenario whose only frame is the
// valid initialize frame changed by edit, followed by a valid initialize
// that a lenient plugin would answer.
func initWith(class, name string, edit func(r *Request, o object) object) Scenario {
	return onInit(class, name, func(r *Request) string {
		return edit(r, r.initialize()).line() + r.initialize().line()
	})
}

// execWith is an invalid-execution scenario whose execute frame is the
// valid one changed by edit.
func execWith(class, name string, edit func(r *Request, o object) object) Scenario {
	return onExec(class, name, func(r *Request) string { return edit(r, r.execute()).line() })
}

func session(name string, offer []plugin.Capability, b func(r *Request) string) Scenario {
	return Scenario{Name: name, Class: "session", Expect: ExpectSession, Offer: offer, Bytes: b}
}

// edgeSession is a valid session about an edge of the request space. The
// plugin must treat the request as valid, but may answer it with a failure
// frame (say, when its output would exceed the limit).
func edgeSession(name string, b func(r *Request) string) Scenario {
	sc := session(name, nil, b)
	sc.AllowFailure = true
	return sc
}

func sessionScenarios(op plugin.Operation) []Scenario {
	all := plugin.Capabilities()
	reversed := make([]plugin.Capability, len(all))
	for i, c := range all {
		reversed[len(all)-1-i] = c
	}
	execute := func(r *Request) string { return r.execute().line() }
	s := []Scenario{
		session("session-valid", nil, execute),
		session("session-minimal-offer", []plugin.Capability{op.Capability()}, execute),
		session("session-every-capability-offered", reversed, execute),
		{Name: "session-host-runner", Class: "session", Expect: ExpectHostRun, Bytes: execute},
		// Escapes, a surrogate pair, raw multi-byte UTF-8 and an escaped
		// LF inside the string: all valid, none a line break on the wire.
		edgeSession("session-escaped-payload", func(r *Request) string {
			return r.withPayload(`"Caf\u00e9 \ud83d\ude00 \"q\" \\ tab\tnew\nline ü \u2028 end"`).line()
		}),
		{
			Name: "session-cancel", Class: "session", Expect: ExpectSession, AllowFailure: true,
			Requires: plugin.CapCancel, CancelWindow: true,
			Bytes: func(r *Request) string {
				return r.execute().line() + header(r.ID, plugin.TypeCancel).line()
			},
		},
	}
	if op == plugin.OpText {
		s = append(s,
			edgeSession("session-input-at-limit", func(r *Request) string {
				return r.withPayload(str(strings.Repeat("a", plugin.TextBytes))).line()
			}),
			edgeSession("session-empty-input", func(r *Request) string {
				return r.withPayload(`""`).line()
			}),
		)
	}
	return s
}

func framingScenarios() []Scenario {
	const c = "framing"
	payload := func(raw string) func(r *Request) string {
		return func(r *Request) string { return r.withPayload(raw).line() }
	}
	return []Scenario{
		{Name: "framing-empty-stdin", Class: c, Expect: ExpectSilentExit, CloseStdin: true,
			Bytes: func(*Request) string { return "" }},
		onInit(c, "framing-blank-line-before-initialize", func(r *Request) string {
			return "\n" + r.initialize().line()
		}),
		onExec(c, "framing-blank-line-before-execute", func(r *Request) string {
			return "\n" + r.execute().line()
		}),
		onInit(c, "framing-malformed-initialize", func(r *Request) string {
			return strings.TrimSuffix(r.initialize().json(), "}") + "\n" + r.initialize().line()
		}),
		onExec(c, "framing-malformed-execute", func(r *Request) string {
			return strings.TrimSuffix(r.execute().json(), "}") + ",}\n"
		}),
		onInit(c, "framing-not-an-object", func(r *Request) string {
			return `["v1"]` + "\n" + r.initialize().line()
		}),
		onInit(c, "framing-two-objects-on-one-line", func(r *Request) string {
			return r.initialize().json() + r.initialize().line()
		}),
		onExec(c, "framing-invalid-utf8", payload("\"bad \xff byte\"")),
		onExec(c, "framing-overlong-utf8", payload("\"slash \xc0\xaf here\"")),
		onExec(c, "framing-utf8-encoded-surrogate", payload("\"half \xed\xa0\x80 pair\"")),
		onExec(c, "framing-lone-high-surrogate-escape", payload(`"half \ud800 pair"`)),
		onExec(c, "framing-lone-low-surrogate-escape", payload(`"half \udc00 pair"`)),
		onExec(c, "framing-reversed-surrogate-escapes", payload(`"\ude00\ud83d"`)),
		onExec(c, "framing-raw-control-character", payload("\"tab\x01here\"")),
		onInit(c, "framing-crlf-initialize", func(r *Request) string {
			return r.initialize().json() + "\r\n" + r.initialize().line()
		}),
		onExec(c, "framing-crlf-execute", func(r *Request) string {
			return r.execute().json() + "\r\n"
		}),
		onInit(c, "framing-space-after-colon", func(r *Request) string {
			return strings.Replace(r.initialize().json(), `"version":`, `"version": `, 1) + "\n" + r.initialize().line()
		}),
		onInit(c, "framing-leading-space", func(r *Request) string {
			return " " + r.initialize().line() + r.initialize().line()
		}),
		onInit(c, "framing-trailing-space", func(r *Request) string {
			return r.initialize().json() + " \n" + r.initialize().line()
		}),
		onExec(c, "framing-tab-between-fields", func(r *Request) string {
			return strings.Replace(r.execute().json(), `,"operation"`, ",\t\"operation\"", 1) + "\n"
		}),
		onExec(c, "framing-oversized-execute", func(r *Request) string {
			base := r.withPayload(`""`).json()
			pad := plugin.FrameBytes + 1 - len(base)
			return r.withPayload(`"` + strings.Repeat("a", pad) + `"`).line()
		}),
		// No LF ever comes and stdin stays open: only a bounded reader
		// rejects this.
		onInit(c, "framing-oversized-without-newline", func(r *Request) string {
			return `{"version":"v1","id":"` + strings.Repeat("a", 3*plugin.FrameBytes)
		}),
		{Name: "framing-unterminated-initialize", Class: c, Expect: ExpectSilentExit, CloseStdin: true,
			Bytes: func(r *Request) string { return r.initialize().json() }},
		{Name: "framing-unterminated-execute", Class: c, Expect: ExpectInitializedExit, CloseStdin: true,
			Bytes: func(r *Request) string { return r.execute().json() }},
		{Name: "framing-eof-before-execute", Class: c, Expect: ExpectInitializedExit, CloseStdin: true,
			Bytes: func(*Request) string { return "" }},
	}
}

// otherID returns a valid id different from id.
func otherID(id string) string {
	last := id[len(id)-1]
	swap := byte('0')
	if last == '0' {
		swap = '1'
	}
	return id[:len(id)-1] + string(swap)
}

// upperID returns id with its hex letters upper-cased and at least one
// letter guaranteed.
func upperID(id string) string { return "ABCDEF" + strings.ToUpper(id[6:]) }

func idScenarios() []Scenario {
	const c = "id"
	setID := func(name string, id func(string) string) Scenario {
		return initWith(c, name, func(r *Request, o object) object { return o.set("id", str(id(r.ID))) })
	}
	return []Scenario{
		setID("id-uppercase", upperID),
		setID("id-too-short", func(id string) string { return id[:31] }),
		setID("id-too-long", func(id string) string { return id + "0" }),
		setID("id-non-hex", func(id string) string { return "g" + id[1:] }),
		setID("id-empty", func(string) string { return "" }),
		execWith(c, "id-mismatch-execute", func(r *Request, o object) object {
			return o.set("id", str(otherID(r.ID)))
		}),
		execWith(c, "id-case-mismatch-execute", func(r *Request, o object) object {
			return o.set("id", str(strings.ToUpper(r.ID)))
		}),
	}
}

func fieldScenarios() []Scenario {
	const c = "field"
	dropInit := func(key string) Scenario {
		return initWith(c, "field-missing-"+key, func(_ *Request, o object) object { return o.drop(key) })
	}
	capitalize := func(s string) string { return strings.ToUpper(s[:1]) + s[1:] }
	return []Scenario{
		initWith(c, "field-unknown-initialize", func(_ *Request, o object) object { return o.add("extra", "1") }),
		initWith(c, "field-foreign-initialize", func(_ *Request, o object) object {
			return o.add("operation", str("text"))
		}),
		execWith(c, "field-unknown-execute", func(_ *Request, o object) object { return o.add("extra", str("x")) }),
		execWith(c, "field-foreign-execute", func(_ *Request, o object) object {
			return o.add("capabilities", caps(plugin.CapText))
		}),
		initWith(c, "field-duplicate-initialize", func(_ *Request, o object) object {
			return o.add("version", str(plugin.Version))
		}),
		execWith(c, "field-duplicate-execute-same-value", func(r *Request, o object) object {
			return o.add(r.payloadKey(), o.get(r.payloadKey()))
		}),
		execWith(c, "field-duplicate-execute-conflicting", func(r *Request, o object) object {
			return o.add(r.payloadKey(), str("something else entirely"))
		}),
		execWith(c, "field-duplicate-operation-conflicting", func(r *Request, o object) object {
			return o.add("operation", str(string(otherOperation(r.Operation))))
		}),
		initWith(c, "field-case-variant-initialize", func(_ *Request, o object) object {
			return o.rename("capabilities", "Capabilities")
		}),
		execWith(c, "field-case-variant-execute", func(r *Request, o object) object {
			return o.rename(r.payloadKey(), capitalize(r.payloadKey()))
		}),
		execWith(c, "field-case-variant-beside-original", func(r *Request, o object) object {
			return o.add(capitalize(r.payloadKey()), str("shadow"))
		}),
		initWith(c, "field-null-initialize", func(_ *Request, o object) object { return o.set("capabilities", "null") }),
		execWith(c, "field-null-execute", func(r *Request, o object) object { return o.set(r.payloadKey(), "null") }),
		execWith(c, "field-null-foreign-execute", func(r *Request, o object) object {
			if r.Operation == plugin.OpText {
				return o.add("workspace", "null")
			}
			return o.add("input", "null")
		}),
		dropInit("version"),
		dropInit("id"),
		dropInit("type"),
		dropInit("capabilities"),
		dropInit("limits"),
		execWith(c, "field-missing-operation", func(_ *Request, o object) object { return o.drop("operation") }),
		execWith(c, "field-missing-payload", func(r *Request, o object) object { return o.drop(r.payloadKey()) }),
	}
}

func typeScenarios() []Scenario {
	const c = "type"
	return []Scenario{
		initWith(c, "type-unknown-frame-type", func(_ *Request, o object) object { return o.set("type", str("hello")) }),
		initWith(c, "type-frame-type-case-variant", func(_ *Request, o object) object {
			return o.set("type", str("Initialize"))
		}),
		initWith(c, "type-id-number", func(_ *Request, o object) object {
			return o.set("id", "12345678901234567890123456789012")
		}),
		initWith(c, "type-capabilities-string", func(_ *Request, o object) object {
			return o.set("capabilities", str("text"))
		}),
		initWith(c, "type-capability-number", func(_ *Request, o object) object { return o.set("capabilities", "[1]") }),
		execWith(c, "type-payload-number", func(r *Request, o object) object { return o.set(r.payloadKey(), "42") }),
		execWith(c, "type-payload-array", func(r *Request, o object) object {
			return o.set(r.payloadKey(), `["x"]`)
		}),
		execWith(c, "type-operation-number", func(_ *Request, o object) object { return o.set("operation", "1") }),
	}
}

func capabilityScenarios() []Scenario {
	const c = "capability"
	offer := func(name, raw string) Scenario {
		return initWith(c, name, func(_ *Request, o object) object { return o.set("capabilities", raw) })
	}
	return []Scenario{
		offer("capability-unknown", `["text","workspace_edit","telepathy"]`),
		offer("capability-duplicate", `["text","workspace_edit","text"]`),
		offer("capability-empty", `[]`),
		offer("capability-no-operation", `["progress","cancel"]`),
		offer("capability-case-variant", `["TEXT","WORKSPACE_EDIT"]`),
		offer("capability-nested-array", `[["text"]]`),
	}
}

func limitsScenarios() []Scenario {
	const c = "limits"
	limits := func(name string, edit func(l object) object) Scenario {
		return initWith(c, name, func(_ *Request, o object) object {
			return o.set("limits", edit(limitsObject()).json())
		})
	}
	setLimit := func(key, raw string) func(object) object {
		return func(l object) object { return l.set(key, raw) }
	}
	rawLimits := func(name, raw string) Scenario {
		return initWith(c, name, func(_ *Request, o object) object { return o.set("limits", raw) })
	}
	return []Scenario{
		limits("limits-frame-bytes-wrong", setLimit("frame_bytes", "1048575")),
		limits("limits-progress-frames-wrong", setLimit("progress_frames", "129")),
		limits("limits-text-bytes-wrong", setLimit("text_bytes", "65535")),
		limits("limits-progress-text-bytes-wrong", setLimit("progress_text_bytes", "2048")),
		limits("limits-commit-subject-bytes-wrong", setLimit("commit_subject_bytes", "255")),
		limits("limits-negative", setLimit("frame_bytes", "-1048576")),
		limits("limits-missing-key", func(l object) object { return l.drop("commit_subject_bytes") }),
		limits("limits-extra-key", func(l object) object { return l.add("output_bytes", "1048576") }),
		limits("limits-duplicate-key", func(l object) object { return l.add("frame_bytes", "1048576") }),
		limits("limits-case-variant-key", func(l object) object { return l.rename("text_bytes", "Text_Bytes") }),
		limits("limits-float", setLimit("frame_bytes", "1048576.0")),
		limits("limits-exponent", setLimit("text_bytes", "6.5536e4")),
		limits("limits-string", setLimit("progress_frames", `"128"`)),
		limits("limits-bool", setLimit("progress_text_bytes", "true")),
		limits("limits-null-value", setLimit("commit_subject_bytes", "null")),
		rawLimits("limits-empty-object", `{}`),
		rawLimits("limits-array", `[1048576,128,65536,1024,256]`),
	}
}

func versionScenarios() []Scenario {
	const c = "version"
	version := func(name, raw string) Scenario {
		return initWith(c, name, func(_ *Request, o object) object { return o.set("version", raw) })
	}
	return []Scenario{
		version("version-v2", str("v2")),
		version("version-uppercase", str("V1")),
		version("version-empty", str("")),
		version("version-number", "1"),
		execWith(c, "version-execute-v2", func(_ *Request, o object) object { return o.set("version", str("v2")) }),
	}
}

func operationScenarios(op plugin.Operation) []Scenario {
	const c = "operation"
	return []Scenario{
		execWith(c, "operation-unknown", func(_ *Request, o object) object { return o.set("operation", str("shout")) }),
		execWith(c, "operation-case-variant", func(r *Request, o object) object {
			return o.set("operation", str(strings.ToUpper(string(r.Operation))))
		}),
		execWith(c, "operation-empty", func(_ *Request, o object) object { return o.set("operation", str("")) }),
		{
			Name: "operation-not-offered", Class: c, Expect: ExpectInitializedExit,
			Offer: []plugin.Capability{op.Capability()},
			Bytes: func(r *Request) string { return r.executeOp(otherOperation(r.Operation)).line() },
		},
	}
}
