package consoleapi

import (
	"encoding/json"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ServiceName and ServiceNamespace name the Service kube-apiserver reaches the server
// through (the APIService's); the serving certificate names it.
const (
	ServiceName      = "anvil-console"
	ServiceNamespace = "anvil-system"
)

// serveDiscovery lists the group version's resources, for kube-apiserver's discovery and
// its check that the APIService is available. It is open to anyone, as kube-apiserver's
// own discovery is: it names resources, nothing of any object.
func serveDiscovery(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: Group + "/" + Version,
		APIResources: []metav1.APIResource{
			{Name: "machines/console", Namespaced: true, Kind: "MachineConsole", Verbs: metav1.Verbs{"get"}},
			{Name: "machines/consolelog", Namespaced: true, Kind: "MachineConsoleLog", Verbs: metav1.Verbs{"get"}},
		},
	})
}
