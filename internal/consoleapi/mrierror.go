package consoleapi

import (
	"errors"
	"net/http"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/streaming/pkg/httpstream"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
)

// ReasonCause is the type of the StatusCause whose message names the MRI reason of a
// refused console (CONSOLE_BUSY, NO_CONSOLE): a 409 alone does not say which.
const ReasonCause metav1.CauseType = "anvil.dev/MRIReason"

// MRIError turns the console API's answer to a client (a broker passing a call on) back
// into the MRI error a runtime gives (CONTRACT.md C1-C4), the inverse of the console
// server's writeGRPCError: 404 NOT_FOUND, 400 INVALID, 409 the reason its cause names
// (NO_CONSOLE if none). Anything else, the console API refusing the caller among it, is
// UNAVAILABLE with what it said: the console is out of reach, not the machine's.
func MRIError(err error) error {
	if err == nil {
		return nil
	}
	// A refused WebSocket upgrade holds the answer as its cause, without unwrapping to it.
	var upgrade *httpstream.UpgradeFailureError
	if errors.As(err, &upgrade) && upgrade.Cause != nil {
		err = upgrade.Cause
	}
	var se apierrors.APIStatus
	if !errors.As(err, &se) {
		return status.Errorf(codes.Unavailable, "the console API: %v", err)
	}
	st := se.Status()
	switch st.Code {
	case http.StatusNotFound:
		return mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_NOT_FOUND, "%s", st.Message)
	case http.StatusBadRequest:
		return mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_INVALID, "%s", st.Message)
	case http.StatusConflict:
		reason := mriv1alpha1.ErrorReason_ERROR_REASON_NO_CONSOLE
		if st.Details != nil {
			for _, c := range st.Details.Causes {
				if r, ok := mriv1alpha1.ErrorReason_value[c.Message]; c.Type == ReasonCause && ok {
					reason = mriv1alpha1.ErrorReason(r)
				}
			}
		}
		return mri.Errorf(reason, "%s", st.Message)
	}
	return status.Errorf(codes.Unavailable, "the console API (%d): %s", st.Code, st.Message)
}
