package intake

import (
	"strings"
	"testing"
)

func TestStartsWithCommand(t *testing.T) {
	for comment, want := range map[string]bool{
		"/forge":                           true,
		"/forge fix the parser":            true,
		"/forge\tnow":                      true,
		"/forge\nplease add a test":        true,
		"\n  \n/forge go":                  true,
		"\r\n/forge":                       true,
		"<!-- hi -->/forge":                true,
		"\u200b/forge":                     true,
		"/forged":                          false,
		"/forge-it":                        false,
		"/Forge":                           false,
		" /forge":                          false,
		"    /forge":                       false,
		"> /forge":                         false,
		"please /forge":                    false,
		"`/forge`":                         false,
		"":                                 false,
		"<!-- /forge -->":                  false,
		"<!--\n/forge\n-->":                false,
		"/for\u200bge":                     true, // what GitHub shows is /forge
		"text\n/forge":                     false,
		strings.Repeat("\n", 1000):         false,
		"/forge" + strings.Repeat("x", 10): false,
	} {
		if got := StartsWithCommand(comment, "/forge"); got != want {
			t.Errorf("StartsWithCommand(%q) = %v", comment, got)
		}
	}
	if StartsWithCommand("/forge", "") {
		t.Error("an empty command matched")
	}
}
