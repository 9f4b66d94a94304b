package ident

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestTable(t *testing.T) {
	sha := strings.Repeat("a", 40)
	for _, tc := range []struct {
		name string
		fn   func(string) bool
		ok   []string
		bad  []string
	}{
		{"ValidID", ValidID,
			[]string{"w", "worker-1", "repo.x_y", "0a", strings.Repeat("a", 64)},
			[]string{"", "-a", ".a", "_a", "A", "a b", "a#1", "é", strings.Repeat("a", 65)}},
		{"ValidRef", ValidRef,
			[]string{"j", "Job_1-x", "-", strings.Repeat("Z", 64)},
			[]string{"", "a.b", "a/b", "a b", strings.Repeat("a", 65)}},
		{"ValidCode", ValidCode,
			[]string{"a", "plugin_failed", "x9", strings.Repeat("a", 64)},
			[]string{"", "_a", "9a", "A", "a-b", strings.Repeat("a", 65)}},
		{"ValidEnvName", ValidEnvName,
			[]string{"A", "_", "FORGE_TOKEN", "a1", strings.Repeat("A", 128)},
			[]string{"", "1A", "A-B", "A=B", "A B", strings.Repeat("A", 129)}},
		{"ValidHexID", ValidHexID,
			[]string{strings.Repeat("0", 32), "0123456789abcdef0123456789abcdef"},
			[]string{"", strings.Repeat("0", 31), strings.Repeat("0", 33), strings.Repeat("A", 32)}},
		{"ValidLane", ValidLane,
			[]string{"worker-1", "worker-1#1", "w#255"},
			[]string{"", "w#", "w#0", "w#01", "w#256", "#1", "W", "w#1#2", "w#a", "w#1000"}},
		{"ValidSHA", ValidSHA,
			[]string{sha, strings.Repeat("0123456789", 4)},
			[]string{"", sha[:39], sha + "a", strings.Repeat("A", 40), strings.Repeat("g", 40), strings.Repeat("a", 64)}},
		{"ValidSHA256", ValidSHA256,
			[]string{strings.Repeat("0", 64)},
			[]string{"", sha, strings.Repeat("0", 63), strings.Repeat("0", 65), strings.Repeat("A", 64)}},
		{"ValidObjectID", ValidObjectID,
			[]string{sha, strings.Repeat("f", 64)},
			[]string{"", sha[:39], strings.Repeat("a", 41), strings.Repeat("a", 63), strings.Repeat("a", 65), strings.Repeat("F", 64)}},
		{"ValidBranch", ValidBranch,
			[]string{"main", "release/1.2", "feature_x-y", strings.Repeat("b", 255)},
			[]string{"", "-x", "/x", ".x", "x/", "x.", "x.lock", "a..b", "a//b", "a/.b", "a@{b", "a b", `a"b`, strings.Repeat("b", 256)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, s := range tc.ok {
				if !tc.fn(s) {
					t.Errorf("%q rejected", s)
				}
			}
			for _, s := range tc.bad {
				if tc.fn(s) {
					t.Errorf("%q accepted", s)
				}
			}
		})
	}
}

func TestLaneName(t *testing.T) {
	for slot, want := range map[int]string{0: "worker-1", 3: "worker-1#3", MaxSlot: "worker-1#255"} {
		got := LaneName("worker-1", slot)
		if got != want || !ValidLane(got) {
			t.Errorf("LaneName(worker-1, %d) = %q (valid %v), want %q", slot, got, ValidLane(got), want)
		}
	}
}

// grammar restates every predicate as a regular expression plus a length
// bound, so the fuzz target compares two independent statements of a rule.
var grammar = []struct {
	name string
	fn   func(string) bool
	re   *regexp.Regexp
	max  int
}{
	{"ValidID", ValidID, regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`), MaxIDBytes},
	{"ValidRef", ValidRef, regexp.MustCompile(`^[A-Za-z0-9_-]+$`), MaxRefBytes},
	{"ValidCode", ValidCode, regexp.MustCompile(`^[a-z][a-z0-9_]*$`), MaxCodeBytes},
	{"ValidEnvName", ValidEnvName, regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`), MaxEnvNameBytes},
	{"ValidHexID", ValidHexID, regexp.MustCompile(`^[0-9a-f]{32}$`), HexIDLen},
	{"ValidSHA", ValidSHA, regexp.MustCompile(`^[0-9a-f]{40}$`), SHAHexLen},
	{"ValidSHA256", ValidSHA256, regexp.MustCompile(`^[0-9a-f]{64}$`), SHA256HexLen},
	{"ValidObjectID", ValidObjectID, regexp.MustCompile(`^([0-9a-f]{40}|[0-9a-f]{64})$`), SHA256HexLen},
	{"ValidLane", ValidLane, regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*(#([1-9]|[1-9][0-9]|1[0-9][0-9]|2[0-4][0-9]|25[0-5]))?$`), MaxIDBytes + 4},
	{"ValidBranch", ValidBranch, regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._/-]*$`), MaxBranchBytes},
}

func grammarAccepts(i int, s string) bool {
	g := grammar[i]
	if !g.re.MatchString(s) || len(s) > g.max {
		return false
	}
	switch g.name {
	case "ValidLane":
		id, _, _ := strings.Cut(s, "#")
		return len(id) <= MaxIDBytes
	case "ValidBranch":
		for _, bad := range []string{"..", "//", "/.", "@{"} {
			if strings.Contains(s, bad) {
				return false
			}
		}
		return !strings.HasSuffix(s, "/") && !strings.HasSuffix(s, ".") && !strings.HasSuffix(s, ".lock")
	}
	return true
}

// FuzzGrammar: no predicate panics, each agrees with its regular-expression
// statement, and an accepted identifier is printable ASCII without '"' or
// '\\' (it never needs escaping in JSON, a header or a log line).
func FuzzGrammar(f *testing.F) {
	seeds, err := filepath.Glob(filepath.Join("testdata", "seed", "*"))
	if err != nil || len(seeds) == 0 {
		f.Fatalf("no seeds under testdata/seed (%v)", err)
	}
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
			f.Add(line)
		}
	}
	f.Fuzz(func(t *testing.T, s string) {
		for i, g := range grammar {
			got := g.fn(s)
			if want := grammarAccepts(i, s); got != want {
				t.Fatalf("%s(%q) = %v, grammar says %v", g.name, s, got, want)
			}
			if !got {
				continue
			}
			for j := 0; j < len(s); j++ {
				if s[j] <= ' ' || s[j] > '~' || s[j] == '"' || s[j] == '\\' {
					t.Fatalf("%s accepted %q with byte %#x", g.name, s, s[j])
				}
			}
		}
	})
}
