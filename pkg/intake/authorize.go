package intake

import (
	"strings"

	"github.com/0k-lab/agent-forge/pkg/ident"
)

// Permission is GitHub's answer to "get repository permissions for a
// user" (GET /repos/{owner}/{repo}/collaborators/{username}/permission)
// for a trigger's actor, asked at trigger time. Permission is the legacy
// base role: admin, write, read or none, where maintain counts as write
// and triage as read; RoleName is the role itself: admin, maintain,
// write, triage, read, or the name of an organization's custom role
// (which inherits one of the base roles).
type Permission struct {
	Permission string
	RoleName   string
}

// Actor is who labelled or commented, as the event or comment names them:
// the login and the account type ("User", "Bot", "Organization").
type Actor struct {
	Login string
	Type  string
}

// Reasons Authorize gives.
const (
	ReasonAuthorised  = "authorised"      // write, maintain, admin, or a custom role on write or admin
	ReasonMalformed   = "malformed_actor" // the login is not GitHub's shape
	ReasonOwnBot      = "own_bot"         // the Gate's own App
	ReasonBot         = "bot"             // any other bot account
	ReasonNotUser     = "not_a_user"      // an account type other than User
	ReasonNoWrite     = "no_write"        // read, triage or none
	ReasonUnknownRole = "unknown_permission"
	maxRoleNameBytes  = 100
	permissionAdmin   = "admin"
	permissionWrite   = "write"
	userType, botType = "User", "Bot"
	botSuffix         = "[bot]"
)

// Decision is Authorize's verdict: Start, or not, with a Reason.
type Decision struct {
	Start  bool
	Reason string
}

// Authorize decides whether actor may start a job (DECISIONS 17): only a
// user whose collaborator permission is write or better (write,
// maintain, admin, or a custom role inheriting write or admin). A bot
// never does, ours (ownBot, the App's bot login, compared without case)
// included, whatever its permission; triage, read and none never do; an
// answer that contradicts itself (a write permission with the triage or
// read role) or that this build does not know refuses. Author
// association and label rights are not inputs: they never authorise.
func Authorize(p Permission, actor Actor, ownBot string) Decision {
	switch {
	case !ident.ValidGitHubLogin(actor.Login):
		return Decision{Reason: ReasonMalformed}
	case ownBot != "" && strings.EqualFold(actor.Login, ownBot):
		return Decision{Reason: ReasonOwnBot}
	case actor.Type == botType || strings.HasSuffix(actor.Login, botSuffix):
		return Decision{Reason: ReasonBot}
	case actor.Type != userType:
		return Decision{Reason: ReasonNotUser}
	}
	switch p.Permission {
	case permissionAdmin, permissionWrite:
	case "read", "none":
		return Decision{Reason: ReasonNoWrite}
	default:
		return Decision{Reason: ReasonUnknownRole}
	}
	switch p.RoleName {
	case "admin", "maintain", "write":
		return Decision{Start: true, Reason: ReasonAuthorised}
	case "triage", "read", "none":
		return Decision{Reason: ReasonNoWrite}
	case "":
		return Decision{Reason: ReasonUnknownRole}
	}
	if len(p.RoleName) > maxRoleNameBytes || strings.ContainsFunc(p.RoleName, func(r rune) bool { return r < 0x20 || Forbidden(r) }) {
		return Decision{Reason: ReasonUnknownRole}
	}
	return Decision{Start: true, Reason: ReasonAuthorised} // a custom role on a write base
}
