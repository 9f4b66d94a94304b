package strictjson

import (
	"errors"
	"strings"
	"testing"
)

// level is a TextUnmarshaler that accepts only "low" and "high"; its error
// echoes the input, which strictjson must never repeat.
type level int

func (l *level) UnmarshalText(b []byte) error {
	switch string(b) {
	case "low":
		*l = 1
	case "high":
		*l = 2
	default:
		return errors.New("bad level " + string(b))
	}
	return nil
}

type leveled struct {
	Levels []struct {
		Level level `json:"level"`
	} `json:"levels"`
}

// A value its TextUnmarshaler refuses, or a non-string, is reported at its
// path, naming the type, never the value.
func TestTextValueErrorsCarryThePath(t *testing.T) {
	var ok leveled
	if err := Decode([]byte(`{"levels":[{"level":"low"},{"level":"hi\u0067h"}]}`), &ok); err != nil || ok.Levels[1].Level != 2 {
		t.Fatalf("Decode = %+v, %v", ok, err)
	}
	for doc, want := range map[string]string{
		`{"levels":[{"level":"low"},{"level":"secretvalue"}]}`: "/levels/1/level: not a valid level",
		`{"levels":[{"level":7}]}`:                             "/levels/0/level: expected level, got number",
		`{"levels":[{"level":{}}]}`:                            "/levels/0/level: expected level, got object",
	} {
		var v leveled
		err := Decode([]byte(doc), &v)
		var se *Error
		if !errors.As(err, &se) || se.Path+": "+se.Reason != want {
			t.Errorf("%s: got %v, want %q", doc, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: error echoes the value: %v", doc, err)
		}
		if v.Levels != nil {
			t.Errorf("%s: target written on error", doc)
		}
	}
}
