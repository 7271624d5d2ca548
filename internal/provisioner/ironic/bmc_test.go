package ironic

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/anvil-dev/anvil/internal/provisioner"
)

const bmcPassword = "bmc-secret-password-42"

// registerFailing registers a redfish node and waits for its BMC check to fail.
func registerFailing(t *testing.T, p *Provisioner, name, address string) provisioner.Node {
	t.Helper()
	r := provisioner.Registration{Name: name, BMCAddress: address, Username: "admin", Password: bmcPassword,
		DisableCertificateVerification: true, BootMACAddress: macFor(name), Architecture: "amd64"}
	start := time.Now()
	if _, err := p.Register(context.Background(), r); err != nil {
		t.Fatalf("Register: %v", err)
	}
	n := waitFor(t, p, name, 3*time.Minute, "failed", func(n provisioner.Node) bool {
		return n.State == provisioner.StateFailed && !n.Busy
	})
	t.Logf("BMC check failed after %s: %s", time.Since(start).Round(time.Millisecond), n.LastError)
	if n.FailedFrom != provisioner.OpRegister {
		t.Errorf("FailedFrom = %q, want %q", n.FailedFrom, provisioner.OpRegister)
	}
	if strings.Contains(n.LastError, bmcPassword) {
		t.Error("LastError holds the BMC password")
	}
	return n
}

func TestRedfishUnreachable(t *testing.T) {
	irc := startIronic(t, nil)
	p, logs := newProvisioner(t, irc, nil)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	n := registerFailing(t, p, "ns~unreachable", "redfish+http://"+addr+"/redfish/v1/Systems/1")
	if !strings.Contains(n.LastError, "Redfish connection failed") {
		t.Errorf("LastError %q does not say the Redfish connection failed", n.LastError)
	}
	if strings.Contains(logs.String(), bmcPassword) {
		t.Error("the provisioner logged the BMC password")
	}
}

// bmc is a Redfish service root and one system, behind basic auth: enough for sushy to
// log in and read the power state, and to be refused with wrong credentials.
func bmc(t *testing.T) *httptest.Server {
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
		if u, pw, ok := r.BasicAuth(); !ok || u != "admin" || pw != "right-password" {
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

func TestRedfishWrongCredentials(t *testing.T) {
	irc := startIronic(t, nil)
	p, logs := newProvisioner(t, irc, nil)
	srv := bmc(t)
	address := "redfish+http://" + strings.TrimPrefix(srv.URL, "http://") + "/redfish/v1/Systems/1"
	n := registerFailing(t, p, "ns~badcreds", address)
	if n.LastError == "" {
		t.Error("no LastError for wrong BMC credentials")
	}
	if strings.Contains(logs.String(), bmcPassword) {
		t.Error("the provisioner logged the BMC password")
	}

	// The right password recovers: Register updates the node and checks the BMC again.
	r := provisioner.Registration{Name: "ns~badcreds", BMCAddress: address, Username: "admin", Password: "right-password",
		BootMACAddress: macFor("ns~badcreds"), Architecture: "amd64"}
	if _, err := p.Register(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, "ns~badcreds", 2*time.Minute, "manageable", idleIn(provisioner.StateManageable))
}
