package github

import "strings"

// Redacted replaces every redacted credential.
const Redacted = "[redacted]"

// tokenPrefixes start GitHub credentials: classic and fine-grained
// tokens (ghp_, gho_, ghu_, ghs_, ghr_, github_pat_), including the
// longer stateless installation-token format that embeds a JWT.
var tokenPrefixes = [...]string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"}

// Redact returns s with every token-looking substring (a GitHub token
// prefix and what follows it, or a base64url JWT starting "eyJ") and every
// exact secret in known replaced by Redacted. Known secrets shorter than
// eight bytes are ignored (replacing them would mangle ordinary text).
func Redact(s string, known ...string) string {
	for _, k := range known {
		if len(k) >= 8 {
			s = strings.ReplaceAll(s, k, Redacted)
		}
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if n := tokenAt(s[i:]); n > 0 {
			b.WriteString(Redacted)
			i += n
			continue
		}
		b.WriteByte(s[i])
		i++
	}
	return b.String()
}

// tokenAt returns the length of the credential starting s, or 0.
func tokenAt(s string) int {
	for _, p := range tokenPrefixes {
		if strings.HasPrefix(s, p) {
			n := len(p) + tokenRun(s[len(p):], true)
			if n > len(p) {
				return n
			}
		}
	}
	if strings.HasPrefix(s, "eyJ") {
		// header.payload[.signature]: at least one dot after a base64url run.
		head := tokenRun(s, false)
		if head < len(s) && s[head] == '.' {
			return head + tokenRun(s[head:], true)
		}
	}
	return 0
}

// tokenRun is the length of the leading run of base64url characters (and
// '.' when dots is true).
func tokenRun(s string, dots bool) int {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || dots && c == '.') {
			return i
		}
	}
	return len(s)
}
