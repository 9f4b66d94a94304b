package agent

import (
	"errors"
	"io"
	"os"
	"strings"

	"github.com/0k-lab/agent-forge/pkg/strictjson"
)

// MaxProfileBytes bounds an operator profile file.
const MaxProfileBytes = 16 << 10

// ProfileVersion is the only profile version.
const ProfileVersion = 1

// ProfileError is a rejected operator profile. Its text names the member
// and the rule, never a value.
type ProfileError struct {
	Agent  string
	Reason string
}

func (e *ProfileError) Error() string { return e.Agent + " profile: " + e.Reason }

// ProfileErr returns a ProfileError.
func ProfileErr(agent, reason string) error { return &ProfileError{Agent: agent, Reason: reason} }

// LoadProfile reads the operator profile at path (a regular file of at
// most MaxProfileBytes) and decodes it strictly into v (pkg/strictjson:
// unique keys, no unknown members, no null, no trailing data), an
// adapter's profile shape with pointer members. The adapter then checks
// the values (version first).
func LoadProfile(agent, path string, v any) error {
	f, err := os.Open(path)
	if err != nil {
		return ProfileErr(agent, "file cannot be opened")
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return ProfileErr(agent, "not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxProfileBytes+1))
	if err != nil {
		return ProfileErr(agent, "file cannot be read")
	}
	return DecodeProfile(agent, data, v)
}

// DecodeProfile is LoadProfile for a document already read.
func DecodeProfile(agent string, data []byte, v any) error {
	if len(data) > MaxProfileBytes {
		return ProfileErr(agent, "file is larger than 16 KiB")
	}
	if err := strictjson.Decode(data, v); err != nil {
		var se *strictjson.Error
		if errors.As(err, &se) {
			return ProfileErr(agent, se.Error())
		}
		return ProfileErr(agent, "not a strict JSON object")
	}
	return nil
}

// CheckVersion checks the required version member.
func CheckVersion(agent string, v *int) error {
	if v == nil || *v != ProfileVersion {
		return ProfileErr(agent, "version must be 1")
	}
	return nil
}

const maxModelBytes = 128

// ValidModel reports whether s is a model name: 1 to 128 bytes of
// [A-Za-z0-9._:/-], not starting with "-" (it becomes an argv element or a
// configuration value).
func ValidModel(s string) bool {
	if len(s) == 0 || len(s) > maxModelBytes || s[0] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(isAlnum(c) || strings.IndexByte("._:/-", c) >= 0) {
			return false
		}
	}
	return true
}

// ModelRule is the value-free rule ValidModel checks.
const ModelRule = "must be 1 to 128 bytes of [A-Za-z0-9._:/-], not starting with -"

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// OneOf reports whether s is in set.
func OneOf(s string, set []string) bool {
	for _, v := range set {
		if s == v {
			return true
		}
	}
	return false
}
