package activity

import (
	"errors"

	"github.com/0k-lab/agent-forge/pkg/ident"
	"github.com/0k-lab/agent-forge/pkg/strictjson"
)

// Version is the only live-activity version this build implements.
const Version = "live_activity/v1"

// Bounds.
const (
	MaxEvents       = 4    // events per attempt (one per stage)
	MaxEntries      = 1024 // attempts a Store holds
	MaxOffer        = 8    // versions in a Worker's offer
	MaxVersionBytes = 64   // bytes of one offered version
	// MaxPayloadBytes bounds an encoded Payload; a valid one is far
	// smaller.
	MaxPayloadBytes = 512
)

// Stage is an operator-facing activity stage.
type Stage string

// The stages, in the only order an attempt may go through them.
const (
	StageAnalyzing       Stage = "analyzing"
	StageEditing         Stage = "editing"
	StageTesting         Stage = "testing"
	StagePreparingResult Stage = "preparing_result"
)

// Stages returns the stages in order.
func Stages() []Stage {
	return []Stage{StageAnalyzing, StageEditing, StageTesting, StagePreparingResult}
}

// Rank is the 1-based position of s in the stage order, or 0 when s is
// not a stage.
func (s Stage) Rank() int {
	switch s {
	case StageAnalyzing:
		return 1
	case StageEditing:
		return 2
	case StageTesting:
		return 3
	case StagePreparingResult:
		return 4
	}
	return 0
}

// Valid reports whether s is one of the four stages.
func (s Stage) Valid() bool { return s.Rank() > 0 }

// Known reports whether v is a version this build implements.
func Known(v string) bool { return v == Version }

// Select returns the version a Gate puts in a lease for a lane that
// offered offered: Version when the offer contains it, else "" (activity
// disabled).
func Select(offered []string) string {
	for _, v := range offered {
		if v == Version {
			return Version
		}
	}
	return ""
}

// Offer returns the versions a Worker offers in its hello.
func Offer() []string { return []string{Version} }

// Errors. Their text is fixed and never contains a value.
var (
	ErrInvalid = errors.New("activity: invalid payload")
	ErrOffer   = errors.New("activity: invalid version offer")
	ErrStale   = errors.New("activity: not the current lease of this lane")
	ErrVersion = errors.New("activity: version was not selected for this lease")
	ErrExpired = errors.New("activity: lease deadline has passed")
	ErrOrder   = errors.New("activity: stage does not advance")
)

// ValidOffer checks a Worker's offer: at most MaxOffer distinct versions,
// each 1..MaxVersionBytes bytes of [a-z0-9._/-]. Versions this build does
// not know are allowed (a Gate ignores them); the offer may be empty.
func ValidOffer(offer []string) error {
	if len(offer) > MaxOffer {
		return ErrOffer
	}
	for i, v := range offer {
		if !ValidVersionToken(v) {
			return ErrOffer
		}
		for _, w := range offer[:i] {
			if w == v {
				return ErrOffer
			}
		}
	}
	return nil
}

// ValidVersionToken reports whether v is well-formed as a version name
// (1..MaxVersionBytes bytes of [a-z0-9._/-]), known or not.
func ValidVersionToken(v string) bool {
	if len(v) == 0 || len(v) > MaxVersionBytes {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '/' || c == '-') {
			return false
		}
	}
	return true
}

// Payload is the body of one Worker → Gate activity message. It has no
// room for anything but identity, version and stage.
type Payload struct {
	JobID     string `json:"job_id"`
	AttemptID string `json:"attempt_id"`
	Version   string `json:"version"`
	Stage     Stage  `json:"stage"`
}

// Validate checks the payload on its own: job and attempt ids are
// ident.ValidRef, the version is one this build
// knows, the stage is one of the four.
func (p Payload) Validate() error {
	if !ident.ValidRef(p.JobID) || !ident.ValidRef(p.AttemptID) || !Known(p.Version) || !p.Stage.Valid() {
		return ErrInvalid
	}
	return nil
}

// DecodePayload strictly decodes and validates one encoded Payload. On
// error it returns the zero Payload.
func DecodePayload(data []byte) (Payload, error) {
	if len(data) > MaxPayloadBytes {
		return Payload{}, ErrInvalid
	}
	var p Payload
	if err := strictjson.Decode(data, &p); err != nil {
		return Payload{}, ErrInvalid
	}
	if err := p.Validate(); err != nil {
		return Payload{}, err
	}
	return p, nil
}
