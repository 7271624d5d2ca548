package poollet

import (
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/imageowner"
	"github.com/anvil-dev/anvil/internal/registrynet"
)

// ImageFoldersFor holds the registries the pool logs in to (its --registry-credentials:
// anvil's registry, with the pools' read credential) to namespaces: on them a Machine
// boots only its namespace's folder and the shared folders (anvil/ and shared). A
// registry the pool reads anonymously anyone may read anyway; one the pool reads with its
// own credential would otherwise hand every tenant's images to every other.
func ImageFoldersFor(logins map[string]registrynet.Login, shared []string) []imageowner.Folders {
	hosts := make([]string, 0, len(logins))
	for h := range logins {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	folders := make([]imageowner.Folders, 0, len(hosts))
	for _, h := range hosts {
		folders = append(folders, imageowner.Folders{Registry: h, Shared: append([]string{imageowner.DefaultSharedFolder}, shared...)})
	}
	return folders
}

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
