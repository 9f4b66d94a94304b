package githubfake

import (
	"bytes"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// GitHub's 401 texts for App JWTs (as GitHub words them).
const (
	msgJWTUndecodable = "A JSON web token could not be decoded"
	msgIATNotInteger  = "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued"
	msgIATFuture      = "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued"
	msgEXPInvalid     = "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires"
	msgEXPTooFar      = "'Expiration time' claim ('exp') is too far in the future"
	msgBadCredentials = "Bad credentials"
	msgNotAccessible  = "Resource not accessible by integration"
)

// Clock tolerances of the fake's JWT checks. GitHub refuses an exp more
// than ten minutes after its own clock, and an iat ahead of it.
const (
	maxJWTLifetime = 10 * time.Minute
	jwtDrift       = 30 * time.Second
)

// bearer returns the credential of "Authorization: Bearer X" (or the
// older "token X").
func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	for _, p := range []string{"Bearer ", "bearer ", "token "} {
		if v, ok := strings.CutPrefix(h, p); ok {
			return v
		}
	}
	return ""
}

// checkJWT verifies an App JWT like GitHub: RS256 signature by the App's
// key, integer iat not in the future, integer exp in the future but at
// most ten minutes out, iss the App ID (number or string) or client ID.
// It returns "" or GitHub's 401 message.
func (a *API) checkJWT(tok string) string {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return msgJWTUndecodable
	}
	enc := base64.RawURLEncoding
	hb, err1 := enc.DecodeString(parts[0])
	cb, err2 := enc.DecodeString(parts[1])
	sig, err3 := enc.DecodeString(parts[2])
	if err1 != nil || err2 != nil || err3 != nil {
		return msgJWTUndecodable
	}
	var header struct {
		Alg string `json:"alg"`
	}
	if json.Unmarshal(hb, &header) != nil || header.Alg != "RS256" {
		return msgJWTUndecodable
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if rsa.VerifyPKCS1v15(a.cfg.PublicKey, crypto.SHA256, sum[:], sig) != nil {
		return msgJWTUndecodable
	}
	var claims map[string]json.RawMessage
	if json.Unmarshal(cb, &claims) != nil {
		return msgJWTUndecodable
	}
	if !a.issuerMatches(claims["iss"]) {
		return msgJWTUndecodable
	}
	now := a.now()
	iat, ok := integer(claims["iat"])
	if !ok {
		return msgIATNotInteger
	}
	if time.Unix(iat, 0).After(now.Add(jwtDrift)) {
		return msgIATFuture
	}
	exp, ok := integer(claims["exp"])
	if !ok || !time.Unix(exp, 0).After(now) {
		return msgEXPInvalid
	}
	if time.Unix(exp, 0).After(now.Add(maxJWTLifetime)) {
		return msgEXPTooFar
	}
	return ""
}

// integer reports the value of a JSON integer (no fraction, no exponent).
func integer(raw json.RawMessage) (int64, bool) {
	s := string(bytes.TrimSpace(raw))
	if s == "" || strings.ContainsAny(s, ".eE\"") {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

func (a *API) issuerMatches(raw json.RawMessage) bool {
	id := strconv.FormatInt(a.cfg.AppID, 10)
	s := string(bytes.TrimSpace(raw))
	if s == id {
		return true
	}
	var str string
	if json.Unmarshal(raw, &str) != nil {
		return false
	}
	return str == id || (a.cfg.ClientID != "" && str == a.cfg.ClientID)
}

// requireJWT answers 401 unless r carries a valid App JWT.
func (a *API) requireJWT(w http.ResponseWriter, r *http.Request) bool {
	tok := bearer(r)
	if tok == "" {
		WriteError(w, http.StatusUnauthorized, "A JSON web token could not be decoded")
		return false
	}
	if msg := a.checkJWT(tok); msg != "" {
		WriteError(w, http.StatusUnauthorized, msg)
		return false
	}
	return true
}

// requireToken answers 401 unless r carries a live installation token
// for owner/repo, and 403 "Resource not accessible by integration" unless
// that token holds perm at level (read is satisfied by write).
func (a *API) requireToken(w http.ResponseWriter, r *http.Request, owner, repo, perm, level string) (*liveToken, bool) {
	t := a.lookupToken(bearer(r))
	if t == nil {
		WriteError(w, http.StatusUnauthorized, msgBadCredentials)
		return nil, false
	}
	if !t.covers(owner, repo) || !allows(t.perms[perm], level) {
		WriteError(w, http.StatusForbidden, msgNotAccessible)
		return nil, false
	}
	return t, true
}

func allows(held, want string) bool {
	return held == want || held == "write" && want == "read"
}
