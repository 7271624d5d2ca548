package ironic

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/gophercloud/gophercloud/v2"

	"github.com/anvil-dev/anvil/internal/provisioner"
)

func ironicError(code int, fault string) error {
	body := fmt.Sprintf(`{"error_message": %q}`, fmt.Sprintf(`{"faultcode": "Client", "faultstring": %q, "debuginfo": null}`, fault))
	return gophercloud.ErrUnexpectedResponseCode{Actual: code, Body: []byte(body), Method: "PUT",
		URL: "http://127.0.0.1:1/v1/nodes/n/states/provision", Expected: []int{202}}
}

func TestClassify(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, tc := range []struct {
		err       error
		want      error
		temporary bool
	}{
		{ironicError(404, "Node n could not be found."), provisioner.ErrNotFound, false},
		{ironicError(409, "Node u is locked by host anvil-ironic, please retry after the current operation is completed."), provisioner.ErrBusy, false},
		{ironicError(400, `The requested action "provide" can not be performed on node "u" while it is in state "available".`), provisioner.ErrWrongState, false},
		{ironicError(400, "Invalid input for field/attribute target."), provisioner.ErrInvalid, false},
		{ironicError(503, "Requested action cannot be performed due to lack of free conductor workers."), provisioner.ErrUnavailable, true},
		{ironicError(500, "(sqlite3.OperationalError) database is locked"), provisioner.ErrUnavailable, true},
		{ironicError(500, "Unable to process request at this time. The concurrent action limit for provisioning has been reached."), provisioner.ErrBusy, false},
		{ironicError(401, "Incorrect username or password"), provisioner.ErrUnavailable, false},
		{fmt.Errorf("Get: %w", refused), provisioner.ErrUnavailable, true},
	} {
		got := classify("doing", tc.err)
		if !errors.Is(got, tc.want) || temporary(tc.err) != tc.temporary {
			t.Errorf("classify(%v) = %v (temporary %v), want %v (temporary %v)", tc.err, got, temporary(tc.err), tc.want, tc.temporary)
		}
		if strings.Contains(got.Error(), "Expected HTTP response code") || strings.Contains(got.Error(), "127.0.0.1:1") {
			t.Errorf("classify kept gophercloud's rendering: %v", got)
		}
	}
}

func TestFaultOf(t *testing.T) {
	if got := faultOf([]byte(`{"error_message": "{\"faultstring\": \"Node x could not be found.\"}"}`)); got != "Node x could not be found." {
		t.Errorf("faultOf = %q", got)
	}
	if got := faultOf([]byte(`plain`)); got != "plain" {
		t.Errorf("faultOf(plain) = %q", got)
	}
}

func TestRedact(t *testing.T) {
	err := fmt.Errorf("creating node n: Ironic answered 400: bad value hunter22: %w", provisioner.ErrInvalid)
	got := redact(err, "hunter22")
	if strings.Contains(got.Error(), "hunter22") || !errors.Is(got, provisioner.ErrInvalid) {
		t.Errorf("redact = %v (ErrInvalid: %v)", got, errors.Is(got, provisioner.ErrInvalid))
	}
	if redact(err, "") != err || redact(nil, "x") != nil {
		t.Error("redact changed an error without the secret")
	}
}
