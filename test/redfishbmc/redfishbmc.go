// Package redfishbmc is a minimal Redfish BMC for tests: a service root and one system
// behind HTTP basic auth. It is enough for Ironic's redfish driver (sushy) to log in, read
// and switch the power, and to be refused with wrong credentials or a power change the
// test makes it refuse; it is a real peer on the wire, not a stand-in for any of anvil's
// parts.
package redfishbmc

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
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

// System is the BMC's one server: its power, and whether the BMC refuses to switch it.
type System struct {
	mu     sync.Mutex
	power  string
	refuse bool
	resets int
}

// Power is the server's power: On or Off.
func (s *System) Power() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.power
}

// RefuseResets makes the BMC answer every reset (power change) with an error, and leave
// the power as it is, until called with false.
func (s *System) RefuseResets(refuse bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refuse = refuse
}

// Resets is how many resets (power changes) the BMC was asked for, refused or not.
func (s *System) Resets() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.resets
}

// reset carries out a ComputerSystem.Reset of type typ; false when refused.
func (s *System) reset(typ string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resets++
	if s.refuse {
		return false
	}
	switch typ {
	case "On", "ForceRestart":
		s.power = "On"
	case "ForceOff", "GracefulShutdown":
		s.power = "Off"
	}
	return true
}

// Start serves the BMC, its server powered on, until the test ends.
func Start(t *testing.T) *httptest.Server {
	t.Helper()
	srv, _ := StartSystem(t, "On")
	return srv
}

// StartSystem serves the BMC until the test ends, its server's power at first power (On
// or Off), and returns the server to steer.
func StartSystem(t *testing.T, power string) (*httptest.Server, *System) {
	t.Helper()
	sys := &System{power: power}
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
				"Id": "1", "Name": "Test", "PowerState": sys.Power(), "UUID": "38947555-7742-3448-3784-823347823834",
				"Boot": map[string]any{"BootSourceOverrideEnabled": "Disabled", "BootSourceOverrideTarget": "None"},
				"Actions": map[string]any{"#ComputerSystem.Reset": map[string]any{
					"target":                            "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset",
					"ResetType@Redfish.AllowableValues": []string{"On", "ForceOff", "GracefulShutdown", "ForceRestart"}}}})
		case "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset":
			// Refusals are client errors: Ironic's Redfish client does not retry them.
			refuse := func(code, msg string) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": code, "message": msg}})
			}
			var body struct{ ResetType string }
			switch {
			case r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&body) != nil:
				refuse("Base.1.0.MalformedJSON", "POST a ResetType")
			case !sys.reset(body.ResetType):
				refuse("Base.1.0.GeneralError", "the server's power cannot be switched")
			default:
				w.WriteHeader(http.StatusNoContent)
			}
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, sys
}
