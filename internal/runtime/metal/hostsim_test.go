package metal

// INTERIM: hostSim stands in for the Host controller and Ironic until
// internal/provisioner/ironic exists; then the tests run on internal/metal/site and this
// file goes. It follows the Host controller's contract (brief "How the pieces fit") and
// checks, as the real one does, that the image URL serves bytes of the checksum.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
)

func startHostSim(t *testing.T, ns string) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(30 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			var hosts metalv1alpha1.HostList
			if err := env.Client.List(ctx, &hosts, client.InNamespace(ns)); err != nil {
				continue
			}
			for i := range hosts.Items {
				simStep(ctx, &hosts.Items[i])
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

func simStep(ctx context.Context, h *metalv1alpha1.Host) {
	before := h.Status.DeepCopy()
	st := &h.Status
	switch st.ProvisioningState {
	case "":
		hw := &metalv1alpha1.HardwareData{ObjectMeta: metav1.ObjectMeta{Namespace: h.Namespace, Name: h.Name},
			Spec: metalv1alpha1.HardwareDataSpec{Architecture: h.Spec.Architecture, CPU: metalv1alpha1.CPU{Count: 8, Model: "fake"}, MemoryMiB: 16 << 10,
				Disks: []metalv1alpha1.Disk{{Name: "/dev/sda", SizeBytes: 100 << 30}}, NICs: []metalv1alpha1.NIC{{Name: "eth0", MACAddress: h.Spec.BootMACAddress}}}}
		if err := env.Client.Create(ctx, hw); err != nil && !apierrors.IsAlreadyExists(err) {
			return
		}
		st.ProvisioningState, st.OperationalStatus = metalv1alpha1.StateAvailable, metalv1alpha1.OperationalOK
		st.Hardware = &metalv1alpha1.HardwareSummary{Architecture: h.Spec.Architecture, CPUs: 8, MemoryMiB: 16 << 10, Disks: 1, NICs: 1}
	case metalv1alpha1.StateAvailable:
		if h.Spec.Image != nil {
			if err := simVerify(ctx, h.Spec.Image); err != nil {
				st.OperationalStatus, st.LastError = metalv1alpha1.OperationalError, err.Error()
				st.Conditions = []metav1.Condition{{Type: metalv1alpha1.ConditionProvisioned, Status: metav1.ConditionFalse,
					Reason: metalv1alpha1.ReasonImageUnavailable, Message: err.Error(), LastTransitionTime: metav1.Now()}}
				break
			}
			st.ProvisioningState, st.OperationalStatus, st.LastError, st.Conditions = metalv1alpha1.StateProvisioning, metalv1alpha1.OperationalOK, "", nil
		}
	case metalv1alpha1.StateProvisioning:
		if h.Spec.Image == nil {
			st.ProvisioningState = metalv1alpha1.StateAvailable
			break
		}
		st.ProvisioningState, st.Image = metalv1alpha1.StateProvisioned, h.Spec.Image.DeepCopy()
	case metalv1alpha1.StateProvisioned:
		if h.Spec.Image == nil || h.Spec.Image.Checksum != st.Image.Checksum {
			st.ProvisioningState = metalv1alpha1.StateDeprovisioning
		}
	case metalv1alpha1.StateDeprovisioning:
		st.ProvisioningState, st.Image, st.PowerState = metalv1alpha1.StateAvailable, nil, metalv1alpha1.PowerOff
	}
	if st.ProvisioningState == metalv1alpha1.StateAvailable || st.ProvisioningState == metalv1alpha1.StateProvisioned {
		st.PowerState = metalv1alpha1.PowerOff
		if h.Spec.Online {
			st.PowerState = metalv1alpha1.PowerOn
		}
	}
	if !equality.Semantic.DeepEqual(before, st) {
		_ = env.Client.Status().Update(ctx, h)
	}
}

// simVerify downloads the image and compares its checksum, as the Host controller does.
func simVerify(ctx context.Context, img *metalv1alpha1.HostImage) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, img.URL, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return &simError{"image download: " + resp.Status}
	}
	sum := sha256.New()
	if _, err := io.Copy(sum, resp.Body); err != nil {
		return err
	}
	if got := "sha256:" + hex.EncodeToString(sum.Sum(nil)); got != img.Checksum {
		return &simError{"checksum mismatch: " + got}
	}
	return nil
}

type simError struct{ msg string }

func (e *simError) Error() string { return e.msg }
