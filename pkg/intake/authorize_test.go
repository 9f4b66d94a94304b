package intake

import "testing"

func TestAuthorize(t *testing.T) {
	const own = "agent-forge[bot]"
	user := func(login string) Actor { return Actor{Login: login, Type: "User"} }
	cases := []struct {
		name   string
		p      Permission
		actor  Actor
		start  bool
		reason string
	}{
		{"admin", Permission{"admin", "admin"}, user("alice"), true, ReasonAuthorised},
		{"maintain", Permission{"write", "maintain"}, user("alice"), true, ReasonAuthorised},
		{"write", Permission{"write", "write"}, user("alice"), true, ReasonAuthorised},
		{"custom role on write", Permission{"write", "release-manager"}, user("alice"), true, ReasonAuthorised},
		{"triage", Permission{"read", "triage"}, user("alice"), false, ReasonNoWrite},
		{"read", Permission{"read", "read"}, user("alice"), false, ReasonNoWrite},
		{"none", Permission{"none", "none"}, user("alice"), false, ReasonNoWrite},
		{"custom role on read", Permission{"read", "helper"}, user("alice"), false, ReasonNoWrite},
		{"write with triage role", Permission{"write", "triage"}, user("alice"), false, ReasonNoWrite},
		{"admin with read role", Permission{"admin", "read"}, user("alice"), false, ReasonNoWrite},
		{"write without role", Permission{"write", ""}, user("alice"), false, ReasonUnknownRole},
		{"unknown permission", Permission{"push", "write"}, user("alice"), false, ReasonUnknownRole},
		{"empty answer", Permission{}, user("alice"), false, ReasonUnknownRole},
		{"case matters", Permission{"Admin", "admin"}, user("alice"), false, ReasonUnknownRole},
		{"custom role with control", Permission{"write", "x\x00"}, user("alice"), false, ReasonUnknownRole},
		{"our bot", Permission{"admin", "admin"}, Actor{Login: own, Type: "Bot"}, false, ReasonOwnBot},
		{"our bot, other case", Permission{"admin", "admin"}, Actor{Login: "Agent-Forge[bot]", Type: "Bot"}, false, ReasonOwnBot},
		{"our bot typed user", Permission{"write", "write"}, user(own), false, ReasonOwnBot},
		{"other bot", Permission{"write", "write"}, Actor{Login: "dependabot[bot]", Type: "Bot"}, false, ReasonBot},
		{"bot login typed user", Permission{"write", "write"}, user("renovate[bot]"), false, ReasonBot},
		{"bot type, plain login", Permission{"write", "write"}, Actor{Login: "github-actions", Type: "Bot"}, false, ReasonBot},
		{"organization", Permission{"admin", "admin"}, Actor{Login: "octo-org", Type: "Organization"}, false, ReasonNotUser},
		{"no type", Permission{"admin", "admin"}, Actor{Login: "alice"}, false, ReasonNotUser},
		{"malformed login", Permission{"admin", "admin"}, user("al ice"), false, ReasonMalformed},
		{"empty login", Permission{"admin", "admin"}, user(""), false, ReasonMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := Authorize(tc.p, tc.actor, own)
			if d.Start != tc.start || d.Reason != tc.reason {
				t.Fatalf("got %+v, want start %v reason %s", d, tc.start, tc.reason)
			}
		})
	}
	// Without our bot's login, other bots are still refused.
	if d := Authorize(Permission{"admin", "admin"}, Actor{Login: own, Type: "Bot"}, ""); d.Start || d.Reason != ReasonBot {
		t.Fatalf("no own bot: %+v", d)
	}
}
