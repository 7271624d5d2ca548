// Package redfishbmc is a minimal Redfish BMC for tests: a service root and one system
// behind HTTP basic auth. It is enough for Ironic's redfish driver (sushy) to log in and
// read the power state, and to be refused with wrong credentials; it is a real peer on the
// wire, not a stand-in for any of anvil's parts.
package redfishbmc

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Username and Password are the only credentials the BMC accepts.
const (
	Username = "admin"
	Password = "right-password"
)

// Address is the redfish+http:// BMC address of the server's one system.
func Address(srv *httptest.Server) string {
	return "redfish+http://" + strings.TrimPrefix(srv.URL, "http://") + "/redfish/v1/Systems/1"
}

// Start serves the BMC until the test ends.
func Start(t *testing.T) *httptest.Server {
	t.Helper()
	obj := func(w http.ResponseWriter, v map[string]any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path := strings.TrimRight(r.URL.Path, "/")
		if path == "/redfish/v1" { // the service root needs no credentials
			obj(w, map[string]any{"@odata.id": "/redfish/v1/", "@odata.type": "#ServiceRoot.v1_5_0.ServiceRoot",
				"Id": "RootService", "Name": "Root Service", "RedfishVersion": "1.6.0", "UUID": "92384634-2938-2342-8820-489239905423",
				"Systems": map[string]any{"@odata.id": "/redfish/v1/Systems"}})
			return
		}
		if u, pw, ok := r.BasicAuth(); !ok || u != Username || pw != Password {
			w.Header().Set("WWW-Authenticate", `Basic realm="bmc"`)
			w.WriteHeader(http.StatusUnauthorized)
			obj(w, map[string]any{"error": map[string]any{"code": "Base.1.0.GeneralError", "message": "Invalid credentials"}})
			return
		}
		switch path {
		case "/redfish/v1/Systems":
			obj(w, map[string]any{"@odata.id": "/redfish/v1/Systems", "Name": "Systems", "Members@odata.count": 1,
				"Members": []any{map[string]any{"@odata.id": "/redfish/v1/Systems/1"}}})
		case "/redfish/v1/Systems/1":
			obj(w, map[string]any{"@odata.id": "/redfish/v1/Systems/1", "@odata.type": "#ComputerSystem.v1_10_0.ComputerSystem",
				"Id": "1", "Name": "Test", "PowerState": "On", "UUID": "38947555-7742-3448-3784-823347823834",
				"Boot": map[string]any{"BootSourceOverrideEnabled": "Disabled", "BootSourceOverrideTarget": "None"},
				"Actions": map[string]any{"#ComputerSystem.Reset": map[string]any{
					"target":                            "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset",
					"ResetType@Redfish.AllowableValues": []string{"On", "ForceOff", "GracefulShutdown", "ForceRestart"}}}})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}
