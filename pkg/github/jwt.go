package github

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"strconv"
	"time"
)

// JWT timing: GitHub wants iat in the past to absorb clock drift and
// refuses an exp more than ten minutes out, so the token is issued a
// minute back and expires nine minutes ahead.
const (
	JWTBackdate = 60 * time.Second
	JWTLifetime = 9 * time.Minute
	// MaxKeyBytes bounds the PEM file holding the App's private key.
	MaxKeyBytes = 16 << 10
	// MinKeyBits is the smallest RSA modulus accepted (GitHub issues 2048).
	MinKeyBits    = 2048
	maxAppIDBytes = 64
)

// ErrKey is returned for any private key that cannot be used; it names
// no part of the key.
var ErrKey = errors.New("github: private key is not a single unencrypted RSA key (PKCS#1 or PKCS#8) of at least 2048 bits")

// ErrAppID is returned for an App ID that is neither a decimal App ID nor
// a client ID.
var ErrAppID = errors.New("github: app id must be a decimal App ID or a client ID")

// ParsePrivateKey parses a PEM document holding exactly one RSA private
// key, PKCS#1 ("RSA PRIVATE KEY") or PKCS#8 ("PRIVATE KEY"). Encrypted
// keys, other key types, extra blocks and trailing data are refused.
func ParsePrivateKey(data []byte) (*rsa.PrivateKey, error) {
	if len(data) == 0 || len(data) > MaxKeyBytes {
		return nil, ErrKey
	}
	block, rest := pem.Decode(data)
	if block == nil || len(bytes.TrimSpace(rest)) != 0 || len(block.Headers) != 0 {
		return nil, ErrKey
	}
	var key *rsa.PrivateKey
	switch block.Type {
	case "RSA PRIVATE KEY":
		k, err := x509.ParsePKCS1PrivateKey(block.Bytes)
		if err != nil {
			return nil, ErrKey
		}
		key = k
	case "PRIVATE KEY":
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, ErrKey
		}
		rk, ok := k.(*rsa.PrivateKey)
		if !ok {
			return nil, ErrKey
		}
		key = rk
	default:
		return nil, ErrKey
	}
	if key.N.BitLen() < MinKeyBits || key.Validate() != nil {
		return nil, ErrKey
	}
	return key, nil
}

// ValidAppID reports whether s can be a JWT issuer: a decimal App ID
// without a leading zero, or a client ID (ASCII letters, digits and '.').
func ValidAppID(s string) bool {
	if s == "" || len(s) > maxAppIDBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.') {
			return false
		}
	}
	return !(s[0] == '0' && decimal(s))
}

func decimal(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// AppJWT returns the RS256 JSON Web Token that authenticates as the App:
// iat is now minus JWTBackdate and exp now plus JWTLifetime, both integer
// seconds; iss is the App ID (a JSON number when decimal, else the client
// ID as a string).
func AppJWT(key *rsa.PrivateKey, appID string, now time.Time) (string, error) {
	if key == nil {
		return "", ErrKey
	}
	if !ValidAppID(appID) {
		return "", ErrAppID
	}
	iss := strconv.Quote(appID)
	if decimal(appID) {
		iss = appID
	}
	iat := now.Add(-JWTBackdate).Unix()
	exp := now.Add(JWTLifetime).Unix()
	header := `{"alg":"RS256","typ":"JWT"}`
	claims := `{"iat":` + strconv.FormatInt(iat, 10) + `,"exp":` + strconv.FormatInt(exp, 10) + `,"iss":` + iss + `}`
	enc := base64.RawURLEncoding
	signing := enc.EncodeToString([]byte(header)) + "." + enc.EncodeToString([]byte(claims))
	sum := sha256.Sum256([]byte(signing))
	// PKCS#1 v1.5 signatures are deterministic; rand only blinds the
	// private-key operation.
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		return "", errors.New("github: cannot sign the app token")
	}
	return signing + "." + enc.EncodeToString(sig), nil
}
