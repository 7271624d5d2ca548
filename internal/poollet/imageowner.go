package poollet

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

// imageNotOwned is the ImageReady condition of a Machine whose image is outside what its
// namespace may boot, or nil. It is checked before the image is read or handed to the
// runtime, whose cache would boot another namespace's image without any registry read.
func (r *MachineReconciler) imageNotOwned(m *computev1alpha1.Machine) *metav1.Condition {
	for _, f := range r.ImageFolders {
		if err := f.UseImage(m.Namespace, m.Spec.Image); err != nil {
			return &metav1.Condition{Type: computev1alpha1.ConditionImageReady, Status: metav1.ConditionFalse,
				Reason: computev1alpha1.ReasonImageNotOwned, Message: fmt.Sprintf("image: %v", err)}
		}
	}
	return nil
}
