package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/test/diskimage"
	"github.com/anvil-dev/anvil/test/scale/measure"
)

// anvilPath creates Hosts through the API and watches them reach Provisioned.
type anvilPath struct {
	c         client.WithWatch
	namespace string
	disk      *diskimage.Server
}

// labelRound marks what one round created, for the clean-up.
const labelRound = "bench.anvil.dev/round"

// run creates n Hosts at once, each already asking for the disk, and returns the seconds
// from the first create to the last Host Provisioned with status.image set.
func (a *anvilPath) run(ctx context.Context, round, n int) (result, error) {
	name := func(i int) string { return fmt.Sprintf("r%d-h%d", round, i) }
	// The config drives exist before the clock starts, as the metal runtime writes a
	// Machine's Secret before it claims a Host.
	err := measure.ForEach(n, 16, func(i int) error {
		meta, _ := json.Marshal(map[string]string{"uuid": name(i), "hostname": name(i)})
		return a.c.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: a.namespace, Name: name(i) + "-cd", Labels: map[string]string{labelRound: fmt.Sprint(round)}},
			Data:       map[string][]byte{"user_data": []byte(userData(name(i))), "meta_data": meta}})
	})
	if err != nil {
		return result{}, err
	}
	image := &metalv1alpha1.HostImage{URL: a.disk.URL, Checksum: "sha256:" + a.disk.SHA256, Format: metalv1alpha1.ImageFormatRaw}
	start := time.Now()
	ph := newPhases(start, "Inspecting", "Provisioning", "Provisioned", "Error")
	var last *metalv1alpha1.Host
	w, err := measure.StartWatch(ctx, a.c, a.namespace, func() client.ObjectList { return &metalv1alpha1.HostList{} }, func(o client.Object) bool {
		h := o.(*metalv1alpha1.Host)
		if h.Status.ProvisioningState != "" {
			ph.reached(string(h.Status.ProvisioningState), h.Name)
		}
		if h.Status.OperationalStatus == metalv1alpha1.OperationalError {
			ph.reached("Error", h.Name) // a failure on the way, retried
		}
		last = h
		return h.Status.ProvisioningState == metalv1alpha1.StateProvisioned &&
			h.Status.OperationalStatus == metalv1alpha1.OperationalOK && h.Status.Image != nil
	})
	if err != nil {
		return result{}, err
	}
	defer w.Stop()
	// One goroutine per Host, as the direct path has one per node.
	_, _, err = measure.CreateAll(ctx, a.c, n, n, func(i int) client.Object {
		h := name(i)
		return &metalv1alpha1.Host{
			ObjectMeta: metav1.ObjectMeta{Namespace: a.namespace, Name: h, Labels: map[string]string{labelRound: fmt.Sprint(round)}},
			Spec: metalv1alpha1.HostSpec{
				BMC:            metalv1alpha1.BMC{Address: "fake://" + h + "?cpus=8&memory_mb=16384&local_gb=100"},
				BootMACAddress: fmt.Sprintf("52:54:02:%02x:%02x:%02x", round&0xff, (i>>8)&0xff, i&0xff),
				Architecture:   computev1alpha1.ArchitectureAMD64,
				Online:         true,
				Image:          image.DeepCopy(),
				ConfigDrive:    &metalv1alpha1.SecretReference{Name: h + "-cd"},
				ConsumerRef:    &metalv1alpha1.ConsumerReference{Namespace: "tenant", Name: h, UID: h},
			},
		}
	})
	if err != nil {
		return result{}, fmt.Errorf("creating Hosts: %w", err)
	}
	end, err := w.Wait(ctx, n, time.Until(deadlineOf(ctx)))
	if err != nil {
		if last != nil {
			err = fmt.Errorf("%w; last Host seen: %s %s/%s %q", err, last.Name, last.Status.ProvisioningState, last.Status.OperationalStatus, last.Status.LastError)
		}
		return result{}, err
	}
	return result{seconds: end.Sub(start).Seconds(), phases: ph.String()}, nil
}

func deadlineOf(ctx context.Context) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return time.Now().Add(time.Hour)
}

// cleanup detaches every Host (the provisioner forgets its node without deprovisioning it)
// and deletes it, waits until they are gone, and deletes the config drives.
func (a *anvilPath) cleanup(ctx context.Context, timeout time.Duration) error {
	var hosts metalv1alpha1.HostList
	if err := a.c.List(ctx, &hosts, client.InNamespace(a.namespace)); err != nil {
		return err
	}
	detach := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"detached":true}}`))
	err := measure.ForEach(len(hosts.Items), 16, func(i int) error {
		h := &hosts.Items[i]
		if err := a.c.Patch(ctx, h, detach); err != nil {
			return client.IgnoreNotFound(err)
		}
		return client.IgnoreNotFound(a.c.Delete(ctx, h))
	})
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for {
		if err := a.c.List(ctx, &hosts, client.InNamespace(a.namespace)); err != nil {
			return err
		}
		if len(hosts.Items) == 0 {
			break
		}
		if time.Now().After(deadline) {
			h := hosts.Items[0]
			return fmt.Errorf("%d Hosts not gone after %s, e.g. %s: %s/%s %q", len(hosts.Items), timeout, h.Name,
				h.Status.ProvisioningState, h.Status.OperationalStatus, h.Status.LastError)
		}
		time.Sleep(500 * time.Millisecond)
	}
	return a.c.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(a.namespace), client.HasLabels{labelRound})
}
