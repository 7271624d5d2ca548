package provisioner

import (
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// NodeName is the name anvil registers a Host under: unique across namespaces, and made of
// characters Ironic accepts in names.
func NodeName(host types.NamespacedName) string { return host.Namespace + "~" + host.Name }

// HostKey is the Host a node name belongs to; false for a name NodeName never makes.
func HostKey(node string) (types.NamespacedName, bool) {
	ns, name, ok := strings.Cut(node, "~")
	return types.NamespacedName{Namespace: ns, Name: name}, ok && ns != "" && name != ""
}
