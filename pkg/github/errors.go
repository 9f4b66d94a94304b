package github

import (
	"errors"
	"strconv"
	"strings"
	"time"
)

// Class is the fixed category of a failed API call; callers branch on it
// and it is the only part of GitHub's answer that reaches error text.
type Class string

// Classes of API failures.
const (
	ClassUnauthorized Class = "unauthorized"       // 401: bad or expired JWT/token
	ClassPermission   Class = "permission"         // 403 "Resource not accessible by integration"
	ClassForbidden    Class = "forbidden"          // any other 403
	ClassRateLimited  Class = "rate_limited"       // a primary or secondary limit outlasted the retries
	ClassNotFound     Class = "not_found"          // 404
	ClassValidation   Class = "validation"         // 422
	ClassConflict     Class = "conflict"           // 409
	ClassServer       Class = "server"             // 5xx
	ClassTransport    Class = "transport"          // no response (the server may still have acted)
	ClassMalformed    Class = "malformed_response" // a response this client cannot believe
	ClassNotMerged    Class = "not_merged"         // a merge answered 200 with "merged": false
	ClassUnexpected   Class = "unexpected_status"  // any other status
	ClassTooLarge     Class = "response_too_large" // an answer over MaxResponseBytes (never retried: it would be again)
)

// APIError is a failed GitHub API call. Error() carries the operation,
// class and status only; GitHub's message is kept privately (redacted)
// for MessageContains.
type APIError struct {
	Op     string // fixed operation name chosen by this package
	Status int    // HTTP status, 0 when no response arrived
	Class  Class
	// RetryAfter, for ClassRateLimited, is how long GitHub asked to wait
	// (0 when it did not say).
	RetryAfter time.Duration
	msg        string // GitHub's message and errors[].message, redacted
}

func (e *APIError) Error() string {
	s := "github " + e.Op + ": " + string(e.Class)
	if e.Status != 0 {
		s += " (status " + strconv.Itoa(e.Status) + ")"
	}
	return s
}

// MessageContains reports whether GitHub's error message contains phrase.
func (e *APIError) MessageContains(phrase string) bool {
	return phrase != "" && strings.Contains(e.msg, phrase)
}

// IsClass reports whether err is an *APIError of class c.
func IsClass(err error, c Class) bool {
	var e *APIError
	return errors.As(err, &e) && e.Class == c
}

// ErrPermissionsMismatch is returned when GitHub grants an installation
// token whose permissions or repositories differ from the request.
var ErrPermissionsMismatch = errors.New("github: the token's permissions or repositories differ from the request")

func errorsAs(err error, e **APIError) bool { return errors.As(err, e) }
