package agent

// Effect is what one kind of event does to a run.
type Effect int

// Effects of the completion rule table.
const (
	// Known: a listed event that decides nothing (session metadata, item
	// lifecycle, the model's messages).
	Known Effect = iota + 1
	// Diagnostic: a listed event the agent reports and goes on from (a
	// retried stream, a tool error, a refused permission): counted, never
	// deciding the outcome, its text never forwarded.
	Diagnostic
	// Begin: the agent's one unit of work started (Codex's turn, Claude
	// Code's session). A second Begin breaks the rules.
	Begin
	// Complete: the provider says the work is done. Only after a Begin,
	// once.
	Complete
	// Fail: the provider says the work failed.
	Fail
	// Refused: the provider refused the credentials. The run stops at once
	// and is a misconfiguration, not a retryable failure.
	Refused
)

// Rule is one row of an adapter's completion table.
type Rule struct {
	Effect Effect
	// AfterDone allows the event after the completion. Nothing else may
	// follow it.
	AfterDone bool
}

// Rules is an adapter's closed completion table, keyed by the event kind
// its classifier returns. A kind that is not in the table is a broken
// stream: the run fails closed (the raw line is kept in the tail).
type Rules map[string]Rule

// phase of the run as the stream tells it.
type phase int

const (
	phaseIdle phase = iota
	phaseWorking
	phaseDone
)

// Verdict is the stream's view of the run, built one event at a time by
// Observe. The zero value is an empty stream.
type Verdict struct {
	Events      int // well-formed events seen
	Diagnostics int // Diagnostic events
	phase       phase
	failed      bool
	refused     bool
	broken      bool   // an unlisted event or one out of order
	Malformed   bool   // a line was rejected; nothing after it is believed
	Final       []byte // the structured final answer an event carried, if any
}

// Observe applies the table to one classified event and reports whether it
// was the first Begin. After a malformed or rule-breaking event, or a
// refusal, it ignores everything. It returns stop=true when the agent
// should be stopped at once (the outcome is already decided against it).
func (v *Verdict) Observe(rules Rules, ev Event) (first, stop bool) {
	if v.Malformed || v.broken || v.refused {
		return false, true
	}
	v.Events++
	rule, ok := rules[ev.Kind]
	if !ok || (v.phase == phaseDone && !rule.AfterDone) {
		v.broken = true
		return false, true
	}
	switch rule.Effect {
	case Diagnostic:
		v.Diagnostics++
	case Begin:
		if v.phase != phaseIdle {
			v.broken = true
			return false, true
		}
		v.phase = phaseWorking
		return true, false
	case Complete:
		if v.phase != phaseWorking {
			v.broken = true
			return false, true
		}
		v.phase = phaseDone
		if ev.Final != nil {
			v.Final = ev.Final
		}
	case Fail:
		v.failed = true
	case Refused:
		v.refused = true
		return false, true
	}
	v.Diagnostics += ev.Diagnostics
	return false, false
}

// Reason is the stream's contribution to the outcome: "" only for a
// well-formed stream that followed the rules to a completion without a
// failure.
func (v *Verdict) Reason() Reason {
	switch {
	case v.refused:
		return ReasonAuthRefused
	case v.Malformed:
		return ReasonMalformedEvents
	case v.broken:
		return ReasonUnexpectedEvent
	case v.failed:
		return ReasonProviderFailed
	case v.phase != phaseDone:
		return ReasonNoCompletion
	}
	return ""
}

// Event is one event line as an adapter's classifier reads it.
type Event struct {
	Kind string // the row of the completion table
	// Diagnostics counts diagnostics inside the event (tool results marked
	// as errors in a Claude Code user message), added to the verdict's.
	Diagnostics int
	// Final is the structured final answer the event carries (Claude
	// Code's result.structured_output), raw JSON; nil for none.
	Final []byte
}
