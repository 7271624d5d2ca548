package ironic

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"

	"github.com/gophercloud/gophercloud/v2"

	"github.com/anvil-dev/anvil/internal/provisioner"
)

// faultOf is Ironic's own message in an error answer: its body is
// {"error_message": "{\"faultstring\": \"...\", ...}"} (a JSON string holding JSON).
func faultOf(body []byte) string {
	var outer struct {
		ErrorMessage json.RawMessage `json:"error_message"`
	}
	if json.Unmarshal(body, &outer) != nil || len(outer.ErrorMessage) == 0 {
		return strings.TrimSpace(string(body))
	}
	var inner struct {
		Faultstring string `json:"faultstring"`
	}
	var s string
	if json.Unmarshal(outer.ErrorMessage, &s) == nil {
		if json.Unmarshal([]byte(s), &inner) == nil && inner.Faultstring != "" {
			return inner.Faultstring
		}
		return s
	}
	if json.Unmarshal(outer.ErrorMessage, &inner) == nil && inner.Faultstring != "" {
		return inner.Faultstring
	}
	return string(outer.ErrorMessage)
}

// statusOf is the HTTP status of a failed call, and Ironic's message; 0 when there was
// no answer.
func statusOf(err error) (int, string) {
	var ue gophercloud.ErrUnexpectedResponseCode
	if errors.As(err, &ue) {
		return ue.Actual, faultOf(ue.Body)
	}
	return 0, ""
}

// temporary: worth retrying inside the call. 503 is Ironic's worker pool being full (or a
// proxy); SQLite's lock contention surfaces as 500 "database is locked"; a refused or
// reset connection is Ironic restarting.
func temporary(err error) bool {
	code, msg := statusOf(err)
	switch code {
	case http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout:
		return true
	case http.StatusInternalServerError:
		return strings.Contains(msg, "database is locked")
	case 0:
		var ne net.Error
		return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
			errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
			(errors.As(err, &ne) && ne.Timeout())
	}
	return false
}

// classify turns a failed call into an error wrapping one of provisioner's, with Ironic's
// message but never the request (which may carry credentials) nor gophercloud's
// rendering of it.
func classify(what string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, provisioner.ErrNotFound) || errors.Is(err, provisioner.ErrBusy) ||
		errors.Is(err, provisioner.ErrWrongState) || errors.Is(err, provisioner.ErrUnavailable) ||
		errors.Is(err, provisioner.ErrInvalid) {
		return err
	}
	code, msg := statusOf(err)
	var kind error
	switch {
	case code == 0:
		return fmt.Errorf("%s: Ironic cannot be reached: %s: %w", what, transportMessage(err), provisioner.ErrUnavailable)
	case code == http.StatusNotFound:
		kind = provisioner.ErrNotFound
	case code == http.StatusConflict:
		// "Node ... is locked by host ..., please retry after the current operation".
		kind = provisioner.ErrBusy
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		msg = "Ironic refused anvil's credentials: " + msg
		kind = provisioner.ErrUnavailable
	case code == http.StatusBadRequest && wrongStateMessage(msg):
		kind = provisioner.ErrWrongState
	case code == http.StatusBadRequest || code == http.StatusNotAcceptable || code == http.StatusUnprocessableEntity:
		kind = provisioner.ErrInvalid
	case strings.Contains(msg, "concurrent action limit"):
		// Ironic's own max_concurrent_deploy/clean (answered as 500): wait like for our
		// queue.
		kind = provisioner.ErrBusy
	default:
		kind = provisioner.ErrUnavailable
	}
	return fmt.Errorf("%s: Ironic answered %d: %s: %w", what, code, msg, kind)
}

func wrongStateMessage(msg string) bool {
	for _, s := range []string{"can not be performed on node", "while it is in state", "in provision state",
		"maintenance mode", "Can not delete node"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// transportMessage describes a failed connection without the URL's query or anything
// the request carried.
func transportMessage(err error) string {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed"
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timed out"
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return oe.Op + " " + oe.Err.Error()
	}
	return "request failed"
}

// redacted is an error whose text had secrets cut out; errors.Is still sees its kind.
type redacted struct {
	msg  string
	kind error
}

func (r redacted) Error() string { return r.msg }
func (r redacted) Unwrap() error { return r.kind }

// redact removes secret from err's text (provisioner.Redact): Ironic's messages quote
// request fields at times, and a BMC password must never reach an error.
func redact(err error, secret string) error {
	if err == nil {
		return nil
	}
	msg := provisioner.Redact(err.Error(), secret)
	if msg == err.Error() {
		return err
	}
	var kind error = provisioner.ErrInvalid
	for _, k := range []error{provisioner.ErrNotFound, provisioner.ErrBusy, provisioner.ErrWrongState, provisioner.ErrUnavailable, provisioner.ErrInvalid} {
		if errors.Is(err, k) {
			kind = k
			break
		}
	}
	return redacted{msg: msg, kind: kind}
}
