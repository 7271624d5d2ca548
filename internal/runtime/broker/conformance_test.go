package broker

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri/conformance"
)

// TestConformance runs the MRI suite on a broker whose downstream is a real anvil (API
// server, controller manager, a fake pool and its poollet), the broker behind a real
// socket and restarted on the same namespace. A downstream Machine's volumes and NICs are
// fixed once bound, so the broker has no hot-plug.
func TestConformance(t *testing.T) {
	s := newSite(t, "region-broker")
	served := conformance.Serve(t, "unix://"+filepath.Join(t.TempDir(), "mri.sock"), func() (conformance.Runtime, error) { return s.start() })
	start := time.Now()
	conformance.Run(t, conformance.Target{
		Start:          served.Start,
		Restart:        served.Restart,
		Spec:           spec,
		MissingImage:   &mriv1alpha1.Image{Reference: images["os"].Reference, Digest: "sha256:" + strings.Repeat("0", 64)},
		WrongArchImage: images["arm-only"],
		OtherImage:     images["os-2"],
		Timeout:        60 * time.Second,
		NoHotplug:      true,
	})
	t.Logf("conformance suite took %s", time.Since(start).Round(time.Millisecond))
}
