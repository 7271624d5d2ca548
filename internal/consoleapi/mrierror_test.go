package consoleapi

import (
	"errors"
	"net/http"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/streaming/pkg/httpstream"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
)

// What a runtime answers crosses the console API and comes back, at a broker, as the same
// MRI error: the code and the reason (busy and no console share 409), whether the answer
// came to a plain GET or to a refused WebSocket upgrade.
func TestRuntimeErrorsCrossTheConsoleAPI(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		code   codes.Code
		reason mriv1alpha1.ErrorReason
	}{
		{"not found", mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_NOT_FOUND, "no machine m-1"), codes.NotFound, mriv1alpha1.ErrorReason_ERROR_REASON_NOT_FOUND},
		{"invalid", mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_INVALID, "tail_lines -1"), codes.InvalidArgument, mriv1alpha1.ErrorReason_ERROR_REASON_INVALID},
		{"busy", mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_CONSOLE_BUSY, "has a writer"), codes.FailedPrecondition, mriv1alpha1.ErrorReason_ERROR_REASON_CONSOLE_BUSY},
		{"no console", mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_NO_CONSOLE, "not running"), codes.FailedPrecondition, mriv1alpha1.ErrorReason_ERROR_REASON_NO_CONSOLE},
		// The pool out of reach, or the poollet refusing the server: the console is, not
		// the machine.
		{"unavailable", status.Error(codes.Unavailable, "connection refused"), codes.Unavailable, mriv1alpha1.ErrorReason_ERROR_REASON_UNSPECIFIED},
		{"refused the server", status.Error(codes.PermissionDenied, "no machinepools/proxy"), codes.Unavailable, mriv1alpha1.ErrorReason_ERROR_REASON_UNSPECIFIED},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answer := &apierrors.StatusError{ErrStatus: *grpcStatus("ns", "m", tc.err)}
			for how, got := range map[string]error{
				"a GET":           MRIError(answer),
				"an upgrade":      MRIError(&httpstream.UpgradeFailureError{Cause: answer}),
				"wrapped as well": MRIError(errors.Join(errors.New("attaching"), &httpstream.UpgradeFailureError{Cause: answer})),
			} {
				if status.Code(got) != tc.code || mri.ReasonOf(got) != tc.reason {
					t.Errorf("through %s: %v (%s, %s), want %s, %s", how, got, status.Code(got), mri.ReasonOf(got), tc.code, tc.reason)
				}
			}
		})
	}
}

// An answer without the cause (an older console server) is still a refusal: NO_CONSOLE;
// one that is not a Status at all (the connection broke) is UNAVAILABLE.
func TestConsoleAPIAnswersWithoutAReason(t *testing.T) {
	conflict := &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusConflict, Message: "refused"}}
	if got := MRIError(conflict); mri.ReasonOf(got) != mriv1alpha1.ErrorReason_ERROR_REASON_NO_CONSOLE {
		t.Errorf("a 409 without a cause: %v, want NO_CONSOLE", got)
	}
	if got := MRIError(errors.New("EOF")); status.Code(got) != codes.Unavailable {
		t.Errorf("a broken connection: %v, want UNAVAILABLE", got)
	}
	if MRIError(nil) != nil {
		t.Error("no error became one")
	}
}
