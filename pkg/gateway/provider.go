package gateway

import (
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/0k-lab/agent-forge/pkg/ident"
)

// Kind is a provider's API: which header carries the key and where the
// usage fields are.
type Kind string

// The API kinds a provider may have.
const (
	// KindOpenAIResponses is the OpenAI Responses API: the key goes in
	// "Authorization: Bearer KEY".
	KindOpenAIResponses Kind = "openai-responses"
	// KindAnthropicMessages is the Anthropic Messages API: the key goes in
	// "x-api-key".
	KindAnthropicMessages Kind = "anthropic-messages"
	// KindGeminiGenerateContent is Google's Gemini API (generateContent,
	// streamGenerateContent): the key goes in "x-goog-api-key".
	KindGeminiGenerateContent Kind = "gemini-generate-content"
)

// Kinds lists every kind, for messages.
var Kinds = []Kind{KindOpenAIResponses, KindAnthropicMessages, KindGeminiGenerateContent}

// keyHeader is the header kind k's upstream reads its key from.
func (k Kind) keyHeader() string {
	switch k {
	case KindAnthropicMessages:
		return "X-Api-Key"
	case KindGeminiGenerateContent:
		return "X-Goog-Api-Key"
	}
	return "Authorization"
}

// keyValue is the value of keyHeader for key.
func (k Kind) keyValue(key string) string {
	if k == KindOpenAIResponses {
		return "Bearer " + key
	}
	return key
}

// Bounds of the providers' configuration.
const (
	MaxProviders      = 16
	MaxHeaders        = 16
	MaxHeaderName     = 64
	MaxHeaderValue    = 1024
	MaxBaseURLBytes   = 2048
	MinKeyBytes       = 16 // shorter keys could not be scanned for (pkg/secretscan)
	MaxKeyBytes       = 4096
	maxProviderIDSize = 64
)

// FileProvider is one entry of worker.json's "providers", as decoded
// (strictly) from the file.
type FileProvider struct {
	ID      string            `json:"id"`
	Kind    string            `json:"kind"`
	BaseURL string            `json:"base_url"`
	KeyEnv  string            `json:"key_env"`
	Headers map[string]string `json:"headers"`
}

// Provider is a validated provider: names and fixed values only, never
// the key itself (the Worker reads it from KeyEnv at startup).
type Provider struct {
	ID      string
	Kind    Kind
	BaseURL *url.URL // https, no user information, query or fragment; no trailing slash
	KeyEnv  string
	Headers [][2]string // canonical name, value; sorted by name
}

// FieldError is a refused provider entry: the member and the rule, never
// a value.
type FieldError struct {
	Field  string // "providers[1].base_url"
	Reason string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

func fieldErr(field, reason string) error { return &FieldError{Field: field, Reason: reason} }

// reservedHeaders are headers no extra header may set: the gateway owns
// the credentials, the framing and the connection.
var reservedHeaders = []string{
	"Authorization", "X-Api-Key", "X-Goog-Api-Key", "Proxy-Authorization",
	"Host", "Content-Length", "Content-Type", "Transfer-Encoding", "Connection", "Keep-Alive",
	"Proxy-Connection", "Te", "Trailer", "Upgrade", "Cookie", "Expect",
}

// ParseProviders validates worker.json's providers. Ids are unique safe
// ids (pkg/ident, at most 64 bytes), the kind is one of Kinds, base_url
// an https URL, key_env an environment variable name no other provider
// uses, and headers at most MaxHeaders extra request headers (token
// names of at most 64 bytes, not one the gateway sets itself; values of
// at most 1024 bytes of visible ASCII and spaces).
func ParseProviders(fps []FileProvider) ([]Provider, error) {
	if len(fps) > MaxProviders {
		return nil, fieldErr("providers", fmt.Sprintf("at most %d entries", MaxProviders))
	}
	var out []Provider
	for i, fp := range fps {
		field := fmt.Sprintf("providers[%d]", i)
		p, err := parseProvider(field, fp)
		if err != nil {
			return nil, err
		}
		for j, prev := range out {
			if prev.ID == p.ID {
				return nil, fieldErr(field+".id", fmt.Sprintf("duplicates providers[%d]", j))
			}
			if prev.KeyEnv == p.KeyEnv {
				return nil, fieldErr(field+".key_env", fmt.Sprintf("duplicates providers[%d]", j))
			}
		}
		out = append(out, p)
	}
	return out, nil
}

func parseProvider(field string, fp FileProvider) (Provider, error) {
	p := Provider{ID: fp.ID, Kind: Kind(fp.Kind), KeyEnv: fp.KeyEnv}
	if !ident.ValidID(fp.ID) || len(fp.ID) > maxProviderIDSize {
		return Provider{}, fieldErr(field+".id", "missing or not a safe id of at most 64 bytes")
	}
	if !knownKind(p.Kind) {
		return Provider{}, fieldErr(field+".kind", "must be one of openai-responses, anthropic-messages, gemini-generate-content")
	}
	u, reason := parseBaseURL(fp.BaseURL)
	if reason != "" {
		return Provider{}, fieldErr(field+".base_url", reason)
	}
	p.BaseURL = u
	if !ident.ValidEnvName(fp.KeyEnv) {
		return Provider{}, fieldErr(field+".key_env", "missing or not an environment variable name")
	}
	if len(fp.Headers) > MaxHeaders {
		return Provider{}, fieldErr(field+".headers", fmt.Sprintf("at most %d entries", MaxHeaders))
	}
	seen := map[string]bool{}
	for name, value := range fp.Headers {
		hf := field + ".headers"
		if !validHeaderName(name) {
			return Provider{}, fieldErr(hf, "a name is not an HTTP token of at most 64 bytes")
		}
		canon := canonicalHeader(name)
		if seen[canon] {
			return Provider{}, fieldErr(hf, "two names differ only in case")
		}
		seen[canon] = true
		for _, r := range reservedHeaders {
			if canon == r {
				return Provider{}, fieldErr(hf, "a name is one the gateway sets itself (credentials, framing, connection)")
			}
		}
		if strings.HasPrefix(canon, "Sec-Websocket-") || strings.HasPrefix(canon, "Proxy-") {
			return Provider{}, fieldErr(hf, "a name is one the gateway sets itself (credentials, framing, connection)")
		}
		if !validHeaderValue(value) {
			return Provider{}, fieldErr(hf, "a value is not 1 to 1024 bytes of visible ASCII and inner spaces")
		}
		p.Headers = append(p.Headers, [2]string{canon, value})
	}
	sort.Slice(p.Headers, func(a, b int) bool { return p.Headers[a][0] < p.Headers[b][0] })
	return p, nil
}

// parseBaseURL checks an upstream base URL: https, a host, no user
// information, query or fragment, a clean path; it returns the reason it
// is refused (value-free) or the URL without a trailing slash.
func parseBaseURL(s string) (*url.URL, string) {
	if s == "" || len(s) > MaxBaseURLBytes {
		return nil, "must be 1 to 2048 bytes"
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f || s[i] == '\\' || s[i] == '"' {
			return nil, "must be printable ASCII without spaces, quotes or backslashes"
		}
	}
	u, err := url.Parse(s)
	switch {
	case err != nil || u.Scheme != "https" || u.Opaque != "" || u.Hostname() == "":
		return nil, "must be an absolute https URL"
	case u.User != nil:
		return nil, "must not carry user information"
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(s, "#"):
		return nil, "must not carry a query or fragment"
	case u.RawPath != "" || strings.Contains(u.Path, "//") || strings.Contains(u.Path+"/", "/./") || strings.Contains(u.Path+"/", "/../"):
		return nil, "must have a plain, clean path"
	case strings.HasSuffix(u.Host, ":"):
		return nil, "has an invalid port"
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 || p[0] == '0' {
			return nil, "has an invalid port"
		}
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	return u, ""
}

// ValidKey reports whether a key value can travel in a header and be
// scanned for: MinKeyBytes to MaxKeyBytes bytes of visible ASCII.
func ValidKey(k string) bool {
	if len(k) < MinKeyBytes || len(k) > MaxKeyBytes {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] <= ' ' || k[i] > '~' {
			return false
		}
	}
	return true
}

func validHeaderName(s string) bool {
	if s == "" || len(s) > MaxHeaderName {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

func validHeaderValue(s string) bool {
	if s == "" || len(s) > MaxHeaderValue || s[0] == ' ' || s[len(s)-1] == ' ' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// canonicalHeader is the canonical MIME form of a valid header name.
func canonicalHeader(s string) string {
	b := []byte(strings.ToLower(s))
	up := true
	for i, c := range b {
		if up && c >= 'a' && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
		up = c == '-'
	}
	return string(b)
}
