package plugin

import (
	"reflect"
	"strings"
	"testing"
)

func offerFrame(caps ...Capability) Frame {
	return Frame{ID: testID, Type: TypeInitialize, Capabilities: caps, Limits: V1Limits()}
}

func selectFrame(caps ...Capability) Frame {
	return Frame{ID: testID, Type: TypeInitialized, Capabilities: caps}
}

func textExecute(input string) Frame {
	return Frame{ID: testID, Type: TypeExecute, Operation: OpText, Input: input}
}

func workspaceExecute() Frame {
	return Frame{ID: testID, Type: TypeExecute, Operation: OpWorkspaceEdit, Workspace: "/w", Instruction: "do", TimeoutMS: 1000}
}

func progressFrame(seq int64) Frame {
	return Frame{ID: testID, Type: TypeProgress, Sequence: seq, Stage: StageWorking}
}

func strp(s string) *string { return &s }

// run feeds frames to a fresh session and returns the index of the first
// rejected frame, or -1.
func run(t *testing.T, frames ...Frame) (*Session, int) {
	t.Helper()
	s, err := NewSession(testID)
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range frames {
		before := *s
		if err := s.Accept(f); err != nil {
			if !reflect.DeepEqual(before, *s) {
				t.Fatal("rejected frame changed the session")
			}
			return s, i
		}
	}
	return s, -1
}

func TestSessionAccepts(t *testing.T) {
	cancel := Frame{ID: testID, Type: TypeCancel}
	result := Frame{ID: testID, Type: TypeResult, Output: strp("HI")}
	all := []Capability{CapText, CapWorkspaceEdit, CapProgress, CapCancel, CapCommitSubject, CapAgentReport}
	cases := map[string][]Frame{
		"text": {offerFrame(CapText), selectFrame(CapText), textExecute("hi"), result},
		"text failure": {offerFrame(CapText), selectFrame(CapText), textExecute("hi"),
			{ID: testID, Type: TypeFailure, Category: CategoryInvalidRequest}},
		"progress and cancel": {offerFrame(CapText, CapProgress, CapCancel), selectFrame(CapCancel, CapText, CapProgress),
			textExecute(""), progressFrame(1), progressFrame(2), cancel, progressFrame(3),
			{ID: testID, Type: TypeFailure, Category: CategoryCancelled}},
		"cancel crossing the terminal": {offerFrame(CapText, CapCancel), selectFrame(CapText, CapCancel), textExecute("x"), result, cancel},
		"workspace legacy":             {offerFrame(all...), selectFrame(CapWorkspaceEdit), workspaceExecute(), {ID: testID, Type: TypeResult}},
		"workspace full": {offerFrame(all...), selectFrame(CapWorkspaceEdit, CapCommitSubject, CapAgentReport), workspaceExecute(),
			{ID: testID, Type: TypeResult, CommitSubject: strp("feat: x"), Summary: strp("s"), Changes: []string{"c"}}},
		"workspace subject only": {offerFrame(CapWorkspaceEdit, CapCommitSubject), selectFrame(CapWorkspaceEdit, CapCommitSubject), workspaceExecute(),
			{ID: testID, Type: TypeResult, CommitSubject: strp("feat: x")}},
		"both operations offered": {offerFrame(CapText, CapWorkspaceEdit), selectFrame(CapText, CapWorkspaceEdit), workspaceExecute(), {ID: testID, Type: TypeResult}},
	}
	for name, frames := range cases {
		t.Run(name, func(t *testing.T) {
			s, bad := run(t, frames...)
			if bad != -1 {
				t.Fatalf("frame %d rejected", bad)
			}
			if !s.Done() || s.Executing() || !s.Terminal().Terminal() {
				t.Fatal("session not done")
			}
		})
	}
}

func TestSessionRejects(t *testing.T) {
	init := []Frame{offerFrame(CapText, CapProgress, CapCancel), selectFrame(CapText, CapProgress, CapCancel), textExecute("x")}
	with := func(fs ...Frame) []Frame { return append(append([]Frame{}, init...), fs...) }
	other := "fedcba9876543210fedcba9876543210"
	result := Frame{ID: testID, Type: TypeResult, Output: strp("X")}
	cancel := Frame{ID: testID, Type: TypeCancel}
	wsInit := []Frame{offerFrame(CapWorkspaceEdit, CapCommitSubject, CapAgentReport), selectFrame(CapWorkspaceEdit), workspaceExecute()}
	cases := []struct {
		name   string
		frames []Frame
		bad    int
	}{
		{"execute first", []Frame{textExecute("x")}, 0},
		{"initialized first", []Frame{selectFrame(CapText)}, 0},
		{"second initialize", []Frame{offerFrame(CapText), offerFrame(CapText)}, 1},
		{"other id", []Frame{{ID: other, Type: TypeInitialize, Capabilities: []Capability{CapText}, Limits: V1Limits()}}, 0},
		{"unoffered selection", []Frame{offerFrame(CapText), selectFrame(CapText, CapProgress)}, 1},
		{"selection without operation", []Frame{offerFrame(CapText, CapProgress), selectFrame(CapProgress)}, 1},
		{"duplicate selection", []Frame{offerFrame(CapText), selectFrame(CapText, CapText)}, 1},
		{"unknown selection", []Frame{offerFrame(CapText), selectFrame(CapText, "magic")}, 1},
		{"unselected operation", []Frame{offerFrame(CapText, CapWorkspaceEdit), selectFrame(CapText), workspaceExecute()}, 2},
		{"second execute", with(textExecute("y")), 3},
		{"progress before execute", []Frame{offerFrame(CapText, CapProgress), selectFrame(CapText, CapProgress), progressFrame(1)}, 2},
		{"progress not negotiated", []Frame{offerFrame(CapText, CapProgress), selectFrame(CapText), textExecute(""), progressFrame(1)}, 3},
		{"progress starts at 2", with(progressFrame(2)), 3},
		{"progress repeats", with(progressFrame(1), progressFrame(1)), 4},
		{"progress skips", with(progressFrame(1), progressFrame(3)), 4},
		{"progress after result", with(result, progressFrame(1)), 4},
		{"second result", with(result, result), 4},
		{"failure after result", with(result, Frame{ID: testID, Type: TypeFailure, Category: CategoryCancelled}), 4},
		{"second cancel", with(cancel, cancel), 4},
		{"cancel not negotiated", []Frame{offerFrame(CapText, CapCancel), selectFrame(CapText), textExecute(""), cancel}, 3},
		{"cancel before execute", []Frame{offerFrame(CapText, CapCancel), selectFrame(CapText, CapCancel), cancel}, 2},
		{"text result without output", with(Frame{ID: testID, Type: TypeResult}), 3},
		{"text result with subject", with(Frame{ID: testID, Type: TypeResult, CommitSubject: strp("x")}), 3},
		{"workspace result with output", append(wsInit, result), 3},
		{"subject not negotiated", append(wsInit, Frame{ID: testID, Type: TypeResult, CommitSubject: strp("x")}), 3},
		{"report not negotiated", append(wsInit, Frame{ID: testID, Type: TypeResult, Summary: strp("s"), Changes: []string{"c"}}), 3},
		{"result id mismatch", with(Frame{ID: other, Type: TypeResult, Output: strp("x")}), 3},
		{"bad limits", []Frame{{ID: testID, Type: TypeInitialize, Capabilities: []Capability{CapText}, Limits: Limits{FrameBytes: 1}}}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, bad := run(t, tc.frames...)
			if bad != tc.bad {
				t.Fatalf("first rejected frame = %d, want %d", bad, tc.bad)
			}
		})
	}
}

func TestProgressLimit(t *testing.T) {
	frames := []Frame{offerFrame(CapText, CapProgress), selectFrame(CapText, CapProgress), textExecute("")}
	for i := int64(1); i <= ProgressFrames+1; i++ {
		frames = append(frames, progressFrame(i))
	}
	s, bad := run(t, frames...)
	if bad != 3+ProgressFrames || s.ProgressCount() != ProgressFrames || s.NextSequence() != ProgressFrames+1 {
		t.Fatalf("bad=%d count=%d", bad, s.ProgressCount())
	}
}

func TestSessionAccessors(t *testing.T) {
	if _, err := NewSession("ABC"); err == nil {
		t.Fatal("bad id accepted")
	}
	s, bad := run(t, offerFrame(CapText, CapCancel), selectFrame(CapText, CapCancel), textExecute("x"), Frame{ID: testID, Type: TypeCancel})
	if bad != -1 || s.ID() != testID || s.Operation() != OpText || !s.Cancelled() || !s.Executing() || s.Done() ||
		!s.Negotiated(CapCancel) || s.Negotiated(CapProgress) ||
		!reflect.DeepEqual(s.Offer(), []Capability{CapText, CapCancel}) ||
		!reflect.DeepEqual(s.Selection(), []Capability{CapText, CapCancel}) {
		t.Fatalf("unexpected session state %+v", s)
	}
}

func TestSelect(t *testing.T) {
	all := Capabilities()
	cases := []struct {
		offer, supported, want []Capability
		ok                     bool
	}{
		{[]Capability{CapText}, []Capability{CapText}, []Capability{CapText}, true},
		{[]Capability{CapAgentReport, CapProgress, CapText}, []Capability{CapProgress, CapText}, []Capability{CapText, CapProgress}, true},
		{all, []Capability{CapWorkspaceEdit, CapCancel, CapCommitSubject, CapAgentReport, CapProgress}, []Capability{CapWorkspaceEdit, CapProgress, CapCancel, CapCommitSubject, CapAgentReport}, true},
		{[]Capability{CapWorkspaceEdit, CapProgress}, []Capability{CapText, CapProgress}, []Capability{CapProgress}, false},
	}
	for _, tc := range cases {
		got, ok := Select(tc.offer, tc.supported)
		if ok != tc.ok || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Select(%v, %v) = %v, %v", tc.offer, tc.supported, got, ok)
		}
	}
}

func TestCheckCommitSubject(t *testing.T) {
	good := []string{"x", "feat: add a thing", "fix: ünïcödé — dash", strings.Repeat("a", 256), "emoji 😀 ok", "tab\u00a0inside"}
	bad := []string{"", " x", "x ", "\tx", "x\u00a0", "\u3000x", "a\nb", "a\rb", "a\u2028b", "a\u2029b", "a\u200bb",
		"a\u00adb", "a\ufeff", "a\x7fb", "a\u0085b", strings.Repeat("a", 257), "bad\xffutf8", "a\x00b"}
	for _, s := range good {
		if err := CheckCommitSubject(s); err != nil {
			t.Errorf("CheckCommitSubject(%q): %v", s, err)
		}
	}
	for _, s := range bad {
		if CheckCommitSubject(s) == nil {
			t.Errorf("CheckCommitSubject(%q) accepted", s)
		}
	}
}

func TestCheckReport(t *testing.T) {
	twelve := strings.Split("a b c d e f g h i j k l", " ")
	good := []struct {
		summary string
		changes []string
	}{
		{"s", []string{"c"}},
		{strings.Repeat("é", 512), twelve},
		{"Summary with inner  spaces.", []string{strings.Repeat("x", 256)}},
	}
	bad := []struct {
		summary string
		changes []string
	}{
		{"", []string{"c"}},
		{"s", nil},
		{"s", []string{}},
		{"s", append(twelve, "m")},
		{"s", []string{""}},
		{"s", []string{"c", " d"}},
		{" s", []string{"c"}},
		{"s\n", []string{"c"}},
		{"a\nb", []string{"c"}},
		{"s", []string{"a\u2028b"}},
		{"s", []string{"\u202eb"}},
		{strings.Repeat("x", 1025), []string{"c"}},
		{"s", []string{strings.Repeat("x", 257)}},
		{"s", []string{"\xff"}},
	}
	for _, tc := range good {
		if err := CheckReport(tc.summary, tc.changes); err != nil {
			t.Errorf("CheckReport(%q, %q): %v", tc.summary, tc.changes, err)
		}
	}
	for _, tc := range bad {
		if CheckReport(tc.summary, tc.changes) == nil {
			t.Errorf("CheckReport(%.20q, %.40q) accepted", tc.summary, tc.changes)
		}
	}
}
