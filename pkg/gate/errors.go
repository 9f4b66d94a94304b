package gate

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/0k-lab/agent-forge/pkg/source"
	"github.com/0k-lab/agent-forge/pkg/strictjson"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

// apiError is an owner-API failure: a stable code, an HTTP status and a
// fixed message. Clients never see internal error text.
type apiError struct {
	status  int
	code    string
	message string
}

func (e *apiError) Error() string { return e.code }

// The stable API error codes.
var (
	errUnauthorized  = &apiError{http.StatusUnauthorized, "unauthorized", "a valid owner token is required"}
	errNotAWorker    = &apiError{http.StatusUnauthorized, "unauthorized", "a valid worker token is required"}
	errNotFound      = &apiError{http.StatusNotFound, "not_found", "no such job"}
	errRouteNotFound = &apiError{http.StatusNotFound, "not_found", "no such route"}
	errMethod        = &apiError{http.StatusMethodNotAllowed, "method_not_allowed", "method not allowed on this route"}
	errTooLarge      = &apiError{http.StatusRequestEntityTooLarge, "too_large", "request body exceeds 1 MiB"}
	errInvalidJSON   = &apiError{http.StatusBadRequest, "invalid_json", "request body is not acceptable strict JSON"}
	errMediaType     = &apiError{http.StatusUnsupportedMediaType, "unsupported_media_type", "request body must be application/json"}
	errUnknownRepo   = &apiError{http.StatusBadRequest, "invalid_task", "repository_id is not registered"}
	errNotWebSocket  = &apiError{http.StatusBadRequest, "not_websocket", "this route takes a WebSocket upgrade (version 13)"}
	errNotReady      = &apiError{http.StatusServiceUnavailable, "not_ready", "gate is not ready"}
	errUnavailable   = &apiError{http.StatusServiceUnavailable, "unavailable", "gate could not complete the request"}
	errInternal      = &apiError{http.StatusInternalServerError, "internal", "internal error"}
)

// invalidTask builds an invalid_task error naming the field (a field name
// from our own schema, never a value).
func invalidTask(field, reason string) *apiError {
	return &apiError{http.StatusBadRequest, "invalid_task", field + ": " + reason}
}

// toAPIError is the one place that maps errors to API errors.
func toAPIError(err error) *apiError {
	var ae *apiError
	var fe *wire.FieldError
	var se *strictjson.Error
	var mbe *http.MaxBytesError
	var src *source.Error
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &src):
		return sourceAPIError(src)
	case errors.As(err, &mbe), errors.Is(err, strictjson.ErrTooLarge):
		return errTooLarge
	case errors.As(err, &fe):
		return invalidTask(fe.Field, fe.Reason)
	case errors.As(err, &se):
		return errInvalidJSON
	}
	return errInternal
}

type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		// source_failed only.
		Phase     string `json:"phase,omitempty"`
		Reason    string `json:"reason,omitempty"`
		Retryable *bool  `json:"retryable,omitempty"`
	} `json:"error"`
}

func writeError(w http.ResponseWriter, err error) {
	ae := toAPIError(err)
	var b errorBody
	b.Error.Code, b.Error.Message = ae.code, ae.message
	var src *source.Error
	if ae.code == codeSourceFailed && errors.As(err, &src) {
		retryable := src.Retryable
		b.Error.Phase, b.Error.Reason, b.Error.Retryable = src.Phase, src.Reason, &retryable
	}
	if ae.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="forge"`)
	}
	// An error may be answered before the request body was read. Close
	// the connection after the answer and stop reading at once: otherwise
	// net/http first waits to discard that body (for a client that
	// announced one and never sends it, until the server's ReadTimeout).
	w.Header().Set("Connection", "close")
	writeJSON(w, ae.status, b)
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	writeEncoded(w, status, b, err)
}

// writeEncoded answers with b, JSON encoded by json.Marshal or its
// equivalent (jobJSON), or an internal error if err is set.
func writeEncoded(w http.ResponseWriter, status int, b []byte, err error) {
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"code":"internal","message":"internal error"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	// A stated length keeps a flushed answer (submit) in one write, not
	// a chunked one whose terminating chunk costs a second write.
	b = append(b, '\n')
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
}
