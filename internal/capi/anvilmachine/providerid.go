package anvilmachine

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
)

// ProviderID is the providerID of the anvil Machine namespace/name: what the AnvilMachine's
// spec, the Cluster API Machine and the Node the guest registers all carry.
func ProviderID(namespace, name string) string {
	return infrav1.ProviderIDScheme + namespace + "/" + name
}

// ParseProviderID returns the namespace and name of the anvil Machine a providerID names.
func ParseProviderID(id string) (namespace, name string, err error) {
	rest, ok := strings.CutPrefix(id, infrav1.ProviderIDScheme)
	if !ok {
		return "", "", fmt.Errorf("providerID %q does not start with %s", id, infrav1.ProviderIDScheme)
	}
	namespace, name, ok = strings.Cut(rest, "/")
	if !ok || len(validation.IsDNS1123Label(namespace)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return "", "", fmt.Errorf("providerID %q is not %s<namespace>/<machine name>", id, infrav1.ProviderIDScheme)
	}
	return namespace, name, nil
}
