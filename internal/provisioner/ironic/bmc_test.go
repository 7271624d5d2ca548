package ironic

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/anvil-dev/anvil/internal/provisioner"
	"github.com/anvil-dev/anvil/test/redfishbmc"
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
	irc := shared.Ironic(t)
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

func TestRedfishWrongCredentials(t *testing.T) {
	irc := shared.Ironic(t)
	p, logs := newProvisioner(t, irc, nil)
	srv := redfishbmc.Start(t)
	address := redfishbmc.Address(srv)
	n := registerFailing(t, p, "ns~badcreds", address)
	if n.LastError == "" {
		t.Error("no LastError for wrong BMC credentials")
	}
	if strings.Contains(logs.String(), bmcPassword) {
		t.Error("the provisioner logged the BMC password")
	}

	// The right password recovers: Register updates the node and checks the BMC again.
	r := provisioner.Registration{Name: "ns~badcreds", BMCAddress: address, Username: redfishbmc.Username, Password: redfishbmc.Password,
		BootMACAddress: macFor("ns~badcreds"), Architecture: "amd64"}
	if _, err := p.Register(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, "ns~badcreds", 2*time.Minute, "manageable", idleIn(provisioner.StateManageable))
}
