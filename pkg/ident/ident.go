package ident

// Bounds of the identifiers. Sizes count bytes.
const (
	MaxIDBytes      = 64  // configuration ids: worker, plugin, repository, pool
	MaxRefBytes     = 64  // job and attempt ids
	MaxCodeBytes    = 64  // failure codes
	MaxEnvNameBytes = 128 // environment-variable names
	HexIDLen        = 32  // hex digits of a random id: generation, plugin session
)

// ValidID reports whether s is a safe configuration id: 1..MaxIDBytes of
// lowercase ASCII letters, digits, '.', '_' or '-', starting with a letter
// or digit.
func ValidID(s string) bool {
	if len(s) == 0 || len(s) > MaxIDBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case (c == '.' || c == '_' || c == '-') && i > 0:
		default:
			return false
		}
	}
	return true
}

// ValidRef reports whether s is a safe job or attempt id: 1..MaxRefBytes
// ASCII letters, digits, '_' or '-'.
func ValidRef(s string) bool {
	if len(s) == 0 || len(s) > MaxRefBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// ValidCode reports whether s has the shape of a failure code:
// [a-z][a-z0-9_]*, at most MaxCodeBytes.
func ValidCode(s string) bool {
	if len(s) == 0 || len(s) > MaxCodeBytes || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

// ValidEnvName reports whether s is a portable environment-variable name:
// [A-Za-z_][A-Za-z0-9_]*, at most MaxEnvNameBytes.
func ValidEnvName(s string) bool {
	if len(s) == 0 || len(s) > MaxEnvNameBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// ValidHexID reports whether s is a random id: exactly HexIDLen lowercase
// hex digits. Connection generations and plugin session ids have this form.
func ValidHexID(s string) bool { return lowerHex(s, HexIDLen) }

// TokenHexLen is the length of a generated secret token: 32 random bytes
// in lowercase hex.
const TokenHexLen = 64

// ValidToken reports whether s has the form of a generated secret token:
// exactly TokenHexLen lowercase hex digits.
func ValidToken(s string) bool { return lowerHex(s, TokenHexLen) }

func lowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
