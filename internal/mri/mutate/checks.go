package mutate

import (
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
)

// CheckPower refuses an unspecified power, so that a missing field never means "on" (E2).
func CheckPower(p mriv1alpha1.Power) error {
	if p == mriv1alpha1.Power_POWER_UNSPECIFIED {
		return mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_INVALID, "power is unspecified: set POWER_ON or POWER_OFF")
	}
	return nil
}

// CheckRebootToken refuses an empty token: a runtime reboots once per token, so without
// one a repeated call could not be told from a new reboot (E3).
func CheckRebootToken(token string) error {
	if token == "" {
		return mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_INVALID, "a reboot needs a token")
	}
	return nil
}
