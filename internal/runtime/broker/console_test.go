package broker

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/streaming/pkg/httpstream"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/config/rbac/brokeridentity"
	"github.com/anvil-dev/anvil/internal/consoleapi"
)

// A broker's downstream identity reaches the consoles of its own namespace's Machines and
// no other's: another broker's Machine on the same site is forbidden to it (its Role holds
// the subresources in its namespace only), for the log and the console alike, while the
// owning broker's identity reads that Machine's log.
func TestBrokerIdentityReachesOnlyItsNamespacesConsoles(t *testing.T) {
	owner := newSite(t, "console-owner")
	r := owner.mustStart(t)
	uid := "8f4a3d0e-0000-4000-8000-0000000000c1"
	resp, err := r.CreateMachine(bg(t), &mriv1alpha1.CreateMachineRequest{Machine: upstream(uid)})
	if err != nil {
		t.Fatal(err)
	}
	// The package's tests share the site's pool: give its room back.
	t.Cleanup(func() {
		if _, err := r.DeleteMachine(bg(t), &mriv1alpha1.DeleteMachineRequest{Id: resp.Machine.Metadata.Id}); err != nil {
			t.Error(err)
		}
		eventually(t, "the downstream Machine gone", func() bool {
			err := env.Client.Get(bg(t), client.ObjectKey{Namespace: owner.ns, Name: uid}, &computev1alpha1.Machine{})
			return apierrors.IsNotFound(err)
		})
	})
	ownerCfg, err := brokeridentity.Identity(bg(t), env.Config, owner.ns, owner.pool, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// The downstream Machine is named by the upstream uid (mapping).
	eventually(t, "its running line in the log, read as the owning broker", func() bool {
		body, err := consoleapi.OpenLog(bg(t), ownerCfg, owner.ns, uid, consoleapi.LogOptions{})
		if err != nil {
			return false
		}
		defer body.Close()
		raw, _ := io.ReadAll(body)
		return bytes.Contains(raw, []byte(": running\n"))
	})

	other := newSite(t, "console-other")
	otherCfg, err := brokeridentity.Identity(bg(t), env.Config, other.ns, other.pool, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if body, err := consoleapi.OpenLog(bg(t), otherCfg, owner.ns, uid, consoleapi.LogOptions{}); !apierrors.IsForbidden(err) {
		if body != nil {
			body.Close()
		}
		t.Errorf("another broker reading the log of %s/%s: %v, want forbidden", owner.ns, uid, err)
	}
	for _, write := range []bool{false, true} {
		s, err := consoleapi.OpenSession(bg(t), otherCfg, owner.ns, uid, write)
		if s != nil {
			s.Close()
		}
		var upgrade *httpstream.UpgradeFailureError
		if !errors.As(err, &upgrade) || !apierrors.IsForbidden(upgrade.Cause) {
			t.Errorf("another broker attaching to %s/%s (write %t): %v, want forbidden", owner.ns, uid, write, err)
		}
	}
}
