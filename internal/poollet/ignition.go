package poollet

import (
	"fmt"

	ignition "github.com/coreos/ignition/v2/config"
)

// validateIgnition refuses a config Ignition itself would refuse, so the user reads why
// on the Machine instead of on a guest's console. Warnings are not errors.
func validateIgnition(data []byte) error {
	_, report, err := ignition.Parse(data)
	if err != nil {
		if report.IsFatal() {
			return fmt.Errorf("the Ignition config is invalid: %v: %s", err, report.String())
		}
		return fmt.Errorf("the Ignition config is invalid: %v", err)
	}
	return nil
}
