package imagebuild

import computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"

func arch(a string) computev1alpha1.Architecture { return computev1alpha1.Architecture(a) }
