package mri

import (
	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

// PowerToMRI converts the wanted power; the API defaults it to On, so "" means On here.
func PowerToMRI(p computev1alpha1.Power) mriv1alpha1.Power {
	if p == computev1alpha1.PowerOff {
		return mriv1alpha1.Power_POWER_OFF
	}
	return mriv1alpha1.Power_POWER_ON
}
