package broker

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/config/rbac/brokeridentity"
	"github.com/anvil-dev/anvil/internal/mri/conformance"
)

// TestConformance runs the MRI suite on a broker whose downstream is a real anvil (API
// server, controller manager, a fake pool and its poollet), the broker behind a real
// socket and restarted on the same namespace: once as the site's admin, once as the
// identity a broker is given downstream (config/rbac/broker and the anvil-broker-scope
// policy), so nothing the suite asks of a broker needs more than that identity allows. A
// downstream Machine's volumes and NICs are fixed once bound, so the broker has no hot-plug.
func TestConformance(t *testing.T) {
	t.Run("AsAdmin", func(t *testing.T) {
		s := newSite(t, "region-broker")
		runConformance(t, s.start)
	})
	t.Run("AsTheBrokerIdentity", func(t *testing.T) {
		s := newSite(t, "region-broker")
		cfg, err := brokeridentity.Identity(context.Background(), env.Config, s.ns, s.pool, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		cl, err := client.New(cfg, client.Options{Scheme: env.Scheme})
		if err != nil {
			t.Fatal(err)
		}
		runConformance(t, func() (*running, error) { return s.startWith(cfg, cl, nil) })
	})
}

func runConformance(t *testing.T, start func() (*running, error)) {
	served := conformance.Serve(t, "unix://"+filepath.Join(t.TempDir(), "mri.sock"), func() (conformance.Runtime, error) { return start() })
	began := time.Now()
	conformance.Run(t, conformance.Target{
		Start:          served.Start,
		Restart:        served.Restart,
		Spec:           spec,
		MissingImage:   &mriv1alpha1.Image{Reference: images["os"].Reference, Digest: "sha256:" + strings.Repeat("0", 64)},
		WrongArchImage: images["arm-only"],
		OtherImage:     images["os-2"],
		Timeout:        60 * time.Second,
		NoHotplug:      true,
		// The downstream's fake pool, through its console API.
		Console: &conformance.ConsoleTarget{Booted: func(log []byte) bool { return bytes.Contains(log, []byte(": running\n")) }},
	})
	t.Logf("conformance suite took %s", time.Since(began).Round(time.Millisecond))
}
