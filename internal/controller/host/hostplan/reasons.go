package hostplan

import (
	"strings"

	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
)

// RegistrationReason names a registration failure from the provisioner's message, so a
// user sees at a glance whether the BMC is unreachable or refuses the credentials. The
// message itself is kept in lastError; this only picks the Reason.
func RegistrationReason(msg string) string {
	m := strings.ToLower(msg)
	for _, s := range []string{"401", "unauthorized", "access denied", "authentication", "invalid credentials", "password"} {
		if strings.Contains(m, s) {
			return metalv1alpha1.ReasonCredentialsInvalid
		}
	}
	for _, s := range []string{"connection refused", "unable to connect", "timed out", "timeout", "unreachable",
		"max retries", "no route", "name or service not known", "failed to connect", "connection error"} {
		if strings.Contains(m, s) {
			return metalv1alpha1.ReasonBMCUnreachable
		}
	}
	return metalv1alpha1.ReasonRegistrationFailed
}
