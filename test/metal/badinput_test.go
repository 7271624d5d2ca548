package metal

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/internal/metal/site"
	"github.com/anvil-dev/anvil/test/metalpool"
	"github.com/anvil-dev/anvil/test/redfishbmc"
)

// closedPort is a loopback port nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// Each kind of bad input shows as a condition saying what is wrong, nothing waits forever,
// and fixing the input makes the Host work.
func TestBadInput(t *testing.T) {
	ns := rig.NewNamespace(t, "infra")
	rig.StartSite(t, ns, func(c *site.Config) { c.MaxBackoff = 2 * time.Second })
	d := serveDisk(t)

	t.Run("UnreachableBMC", func(t *testing.T) {
		creds := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bmc-unreachable"},
			Data: map[string][]byte{"username": []byte("admin"), "password": []byte("s3cret-unreachable")}}
		h := fakeHost(ns, "unreachable", 2001)
		h.Spec.BMC = metalv1alpha1.BMC{Address: "redfish+http://" + closedPort(t) + "/redfish/v1/Systems/1",
			CredentialsSecretRef: &metalv1alpha1.SecretReference{Name: creds.Name}}
		rig.Create(t, creds, h)
		got := rig.WaitHost(t, ns, h.Name, "failed with BMCUnreachable", 2*time.Minute, metalpool.FailedWith(metalv1alpha1.ReasonBMCUnreachable))
		assertNoSecret(t, got, "s3cret-unreachable")
		update(t, ns, h.Name, func(h *metalv1alpha1.Host) {
			h.Spec.BMC = metalv1alpha1.BMC{Address: "fake://unreachable"}
		})
		rig.WaitHost(t, ns, h.Name, "Available once the BMC address is fixed", 2*time.Minute, metalpool.InState(metalv1alpha1.StateAvailable))
	})

	t.Run("WrongCredentials", func(t *testing.T) {
		bmc := redfishbmc.Start(t)
		creds := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bmc-wrong"},
			Data: map[string][]byte{"username": []byte(redfishbmc.Username), "password": []byte("wrong-password-123")}}
		h := fakeHost(ns, "wrongcreds", 2005)
		h.Spec.BMC = metalv1alpha1.BMC{Address: redfishbmc.Address(bmc), CredentialsSecretRef: &metalv1alpha1.SecretReference{Name: creds.Name}}
		rig.Create(t, creds, h)
		got := rig.WaitHost(t, ns, h.Name, "failed with CredentialsInvalid", 2*time.Minute, metalpool.FailedWith(metalv1alpha1.ReasonCredentialsInvalid))
		assertNoSecret(t, got, "wrong-password-123")
		// Fixing the Secret is enough: its watch registers the Host again.
		creds.Data["password"] = []byte(redfishbmc.Password)
		if err := rig.Env.Client.Update(context.Background(), creds); err != nil {
			t.Fatal(err)
		}
		rig.WaitHost(t, ns, h.Name, "registered once the password is fixed", time.Minute, func(h *metalv1alpha1.Host) bool {
			c := metalpool.Condition(h, metalv1alpha1.ConditionRegistered)
			return c != nil && c.Status == metav1.ConditionTrue
		})
	})

	t.Run("MissingCredentials", func(t *testing.T) {
		h := fakeHost(ns, "nocreds", 2002)
		h.Spec.BMC = metalv1alpha1.BMC{Address: "ipmi://127.0.0.1:1", CredentialsSecretRef: &metalv1alpha1.SecretReference{Name: "does-not-exist"}}
		rig.Create(t, h)
		rig.WaitHost(t, ns, h.Name, "failed with CredentialsSecretMissing", time.Minute, metalpool.FailedWith(metalv1alpha1.ReasonCredentialsMissing))
	})

	t.Run("ImageNotFound", func(t *testing.T) {
		h := fakeHost(ns, "img404", 2003)
		rig.Create(t, h)
		rig.WaitHost(t, ns, h.Name, "Available", 2*time.Minute, metalpool.InState(metalv1alpha1.StateAvailable))
		update(t, ns, h.Name, func(h *metalv1alpha1.Host) {
			h.Spec.Image = &metalv1alpha1.HostImage{URL: d.Base() + "/missing.raw", Checksum: d.Checksum()}
			h.Spec.ConsumerRef = &metalv1alpha1.ConsumerReference{Namespace: "tenant", Name: "x", UID: "x"}
		})
		rig.WaitHost(t, ns, h.Name, "failed with ImageUnavailable", time.Minute, metalpool.FailedWith(metalv1alpha1.ReasonImageUnavailable))
		update(t, ns, h.Name, func(h *metalv1alpha1.Host) { h.Spec.Image = d.Image() })
		rig.WaitHost(t, ns, h.Name, "Provisioned once the URL is fixed", 2*time.Minute, metalpool.Provisioned)
	})

	t.Run("ChecksumMismatch", func(t *testing.T) {
		h := fakeHost(ns, "badsum", 2004)
		rig.Create(t, h)
		rig.WaitHost(t, ns, h.Name, "Available", 2*time.Minute, metalpool.InState(metalv1alpha1.StateAvailable))
		update(t, ns, h.Name, func(h *metalv1alpha1.Host) {
			h.Spec.Image = &metalv1alpha1.HostImage{URL: d.URL, Checksum: "sha256:" + zeros}
			h.Spec.ConsumerRef = &metalv1alpha1.ConsumerReference{Namespace: "tenant", Name: "y", UID: "y"}
		})
		rig.WaitHost(t, ns, h.Name, "failed with ImageChecksumMismatch", time.Minute, metalpool.FailedWith(metalv1alpha1.ReasonImageChecksumMismatch))
		update(t, ns, h.Name, func(h *metalv1alpha1.Host) { h.Spec.Image = d.Image() })
		rig.WaitHost(t, ns, h.Name, "Provisioned once the checksum is fixed", 2*time.Minute, metalpool.Provisioned)
	})
}

const zeros = "0000000000000000000000000000000000000000000000000000000000000000"

// assertNoSecret fails when a password shows anywhere in the Host's status.
func assertNoSecret(t *testing.T, h *metalv1alpha1.Host, secret string) {
	t.Helper()
	if s := metalpool.Describe(h); strings.Contains(s, secret) {
		t.Fatalf("the Host's status shows the BMC password: %s", s)
	}
}
