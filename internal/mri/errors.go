package mri

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

// LabelMachineUID carries the UID of the Machine object a runtime machine belongs to.
// CreateMachine is idempotent on it (CONTRACT.md I2).
const LabelMachineUID = "anvil.dev/machine-uid"

// LabelMachineNamespace carries the namespace of the Machine object. A runtime that keeps
// tenants apart (the QEMU runtime's segments: one per namespace and network) reads it.
const LabelMachineNamespace = "anvil.dev/machine-namespace"

// codeOf is the gRPC code that goes with each reason (CONTRACT.md E1).
var codeOf = map[mriv1alpha1.ErrorReason]codes.Code{
	mriv1alpha1.ErrorReason_ERROR_REASON_NO_CAPACITY:        codes.ResourceExhausted,
	mriv1alpha1.ErrorReason_ERROR_REASON_WRONG_ARCHITECTURE: codes.FailedPrecondition,
	mriv1alpha1.ErrorReason_ERROR_REASON_IMAGE_NOT_FOUND:    codes.NotFound,
	mriv1alpha1.ErrorReason_ERROR_REASON_NOT_FOUND:          codes.NotFound,
	mriv1alpha1.ErrorReason_ERROR_REASON_ALREADY_EXISTS:     codes.AlreadyExists,
	mriv1alpha1.ErrorReason_ERROR_REASON_INVALID:            codes.InvalidArgument,
	mriv1alpha1.ErrorReason_ERROR_REASON_CONSOLE_BUSY:       codes.FailedPrecondition,
	mriv1alpha1.ErrorReason_ERROR_REASON_NO_CONSOLE:         codes.FailedPrecondition,
}

// Errorf returns a gRPC error with the reason's code and an ErrorDetail.
func Errorf(reason mriv1alpha1.ErrorReason, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	code, ok := codeOf[reason]
	if !ok {
		code = codes.Unknown
	}
	st, err := status.New(code, msg).WithDetails(&mriv1alpha1.ErrorDetail{Reason: reason, Message: msg})
	if err != nil {
		return status.Error(code, msg)
	}
	return st.Err()
}

// ReasonOf returns the ErrorDetail reason carried by err, or UNSPECIFIED.
func ReasonOf(err error) mriv1alpha1.ErrorReason {
	if err == nil {
		return mriv1alpha1.ErrorReason_ERROR_REASON_UNSPECIFIED
	}
	st, ok := status.FromError(err)
	if !ok {
		var se interface{ GRPCStatus() *status.Status }
		if !errors.As(err, &se) {
			return mriv1alpha1.ErrorReason_ERROR_REASON_UNSPECIFIED
		}
		st = se.GRPCStatus()
	}
	for _, d := range st.Details() {
		if ed, ok := d.(*mriv1alpha1.ErrorDetail); ok {
			return ed.Reason
		}
	}
	return mriv1alpha1.ErrorReason_ERROR_REASON_UNSPECIFIED
}

// MessageOf returns the ErrorDetail message of err, or err's text.
func MessageOf(err error) string {
	if st, ok := status.FromError(err); ok {
		for _, d := range st.Details() {
			if ed, ok := d.(*mriv1alpha1.ErrorDetail); ok {
				return ed.Message
			}
		}
		return st.Message()
	}
	return err.Error()
}

// IsNotFound reports whether err says the machine does not exist.
func IsNotFound(err error) bool {
	return ReasonOf(err) == mriv1alpha1.ErrorReason_ERROR_REASON_NOT_FOUND
}

// IsRefusal reports whether err is a runtime refusing a machine it cannot place: the
// caller hands such a machine back to the scheduler instead of retrying here. INVALID is
// one: a spec this runtime can never run (a disk-less image on bare metal, say) may suit
// another pool, and retrying it here would never end.
func IsRefusal(err error) bool {
	switch ReasonOf(err) {
	case mriv1alpha1.ErrorReason_ERROR_REASON_NO_CAPACITY, mriv1alpha1.ErrorReason_ERROR_REASON_WRONG_ARCHITECTURE,
		mriv1alpha1.ErrorReason_ERROR_REASON_INVALID:
		return true
	}
	return false
}
