package metal

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/test/diskimage"
)

// serveDisk serves a raw disk image until the test ends.
func serveDisk(t *testing.T) *diskimage.Server {
	t.Helper()
	d := diskimage.Serve()
	t.Cleanup(d.Close)
	return d
}

// fakeHost is a Host on Ironic's fake hardware.
func fakeHost(ns, name string, i int) *metalv1alpha1.Host {
	return &metalv1alpha1.Host{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"rack": "r1"}},
		Spec: metalv1alpha1.HostSpec{
			BMC:            metalv1alpha1.BMC{Address: "fake://" + name + "?cpus=8&memory_mb=16384&local_gb=100"},
			BootMACAddress: fmt.Sprintf("52:54:00:%02x:%02x:%02x", (i>>16)&0xff, (i>>8)&0xff, i&0xff),
			Architecture:   computev1alpha1.ArchitectureAMD64,
		},
	}
}

// update changes a Host with f, retrying on conflicts.
func update(t *testing.T, ns, name string, f func(*metalv1alpha1.Host)) {
	t.Helper()
	rig.ChangeHost(t, ns, name, "updating", func(ctx context.Context, h *metalv1alpha1.Host) error {
		f(h)
		return rig.Env.Client.Update(ctx, h)
	})
}
