package metal

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
)

// hostSeen is what one watch event showed of a Host: its state, its consumer's uid, and
// its Wiped condition ("" when it has none).
type hostSeen struct {
	state           metalv1alpha1.ProvisioningState
	consumer, wiped string
}

// watchHost records every version of Host name the apiserver sends from now on.
func (s *site) watchHost(t *testing.T, name string) func() []hostSeen {
	t.Helper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := wc.Watch(ctx, &metalv1alpha1.HostList{}, client.InNamespace(s.infra), client.MatchingFields{"metadata.name": name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	var mu sync.Mutex
	var seen []hostSeen
	go func() {
		for ev := range w.ResultChan() {
			h, ok := ev.Object.(*metalv1alpha1.Host)
			if !ok {
				continue
			}
			v := hostSeen{state: h.Status.ProvisioningState}
			if h.Spec.ConsumerRef != nil {
				v.consumer = h.Spec.ConsumerRef.UID
			}
			if c := meta.FindStatusCondition(h.Status.Conditions, metalv1alpha1.ConditionWiped); c != nil {
				v.wiped = string(c.Status) + "/" + c.Reason
			}
			mu.Lock()
			seen = append(seen, v)
			mu.Unlock()
		}
	}()
	return func() []hostSeen {
		mu.Lock()
		defer mu.Unlock()
		return append([]hostSeen(nil), seen...)
	}
}

// A reimage keeps the tenant's server: the Host holds the same consumer throughout and is
// rebuilt in place by Ironic with the new image and the new config drive — never
// deprovisioned, never Deprovisioning or Available, its Wiped condition untouched — and
// the machine is settled again only once that rebuild is done. A reimage that changes
// only the first-boot data rebuilds once more; one of a machine being deleted is refused.
func TestReimageRebuildsInPlace(t *testing.T) {
	s := newSite(t, 1)
	s.sweepGrace = 200 * time.Millisecond
	rt := s.mustStart(t)
	ctx := context.Background()
	id := createMachine(t, rt.Runtime, s.machine("web", s.spec("os"))).Metadata.Id
	before := await(t, rt.Runtime, id, "ran", isRunning)
	h := s.hostOf(t, id)
	consumer, firstDrive := h.Spec.ConsumerRef.UID, h.Spec.ConfigDrive.Name
	seen := s.watchHost(t, h.Name)
	if got := s.deployments.of(h); len(got) != 1 || got[0].op != "Provision" {
		t.Fatalf("before the reimage the Host controller made %v, want one Provision", got)
	}

	other := &mriv1alpha1.Image{Reference: s.images["os-2"].Reference, Digest: s.images["os-2"].Digest}
	fb := &mriv1alpha1.FirstBootConfig{Format: mriv1alpha1.ConfigFormat_CONFIG_FORMAT_CLOUD_INIT, Data: []byte("#cloud-config\nhostname: reimaged\n")}
	resp, err := rt.ReimageMachine(ctx, &mriv1alpha1.ReimageMachineRequest{Id: id, Image: other, FirstBoot: fb})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Machine.Metadata.Generation != before.Metadata.Generation+1 || resp.Machine.Status.ObservedGeneration == resp.Machine.Metadata.Generation {
		t.Fatalf("reimage answered generation %d observed %d, want %d and not observed yet",
			resp.Machine.Metadata.Generation, resp.Machine.Status.ObservedGeneration, before.Metadata.Generation+1)
	}
	after := await(t, rt.Runtime, id, "ran the new image", func(m *mriv1alpha1.Machine) bool {
		return isRunning(m) && proto.Equal(m.Spec.Image, other)
	})
	if !proto.Equal(after.Spec.FirstBoot, fb) || after.Metadata.Id != id {
		t.Errorf("after the reimage: id %s first_boot %v, want %s %v", after.Metadata.Id, after.Spec.FirstBoot, id, fb)
	}

	h = s.hostOf(t, id)
	if h.Spec.ConsumerRef.UID != consumer || h.Status.ProvisioningState != metalv1alpha1.StateProvisioned ||
		h.Spec.Image.Checksum != s.images["os-2"].Disk || !h.Spec.Image.Same(h.Status.Image) {
		t.Errorf("Host after the reimage: consumer %s state %s image %+v ran %+v; want consumer %s, Provisioned with os-2",
			h.Spec.ConsumerRef.UID, h.Status.ProvisioningState, h.Spec.Image, h.Status.Image, consumer)
	}
	token := h.Annotations[metalv1alpha1.AnnotationRebuild]
	if metalv1alpha1.RebuildConsumer(token) != consumer || h.Status.RebuildToken != token {
		t.Errorf("rebuild token asked %q, carried out %q: want one naming consumer %s, carried out", token, h.Status.RebuildToken, consumer)
	}
	drive := configDriveOf(t, s, h)
	if h.Spec.ConfigDrive.Name == firstDrive || string(drive.Data["user_data"]) != string(fb.Data) {
		t.Errorf("config drive after the reimage: %s with user_data %q; want a new Secret with the new data", h.Spec.ConfigDrive.Name, drive.Data["user_data"])
	}
	var meta map[string]string
	if err := json.Unmarshal(drive.Data["meta_data"], &meta); err != nil || meta["uuid"] != consumer {
		t.Errorf("the new config drive's meta_data %s: uuid is not the Machine's uid %s", drive.Data["meta_data"], consumer)
	}

	// What Ironic was asked: one rebuild with the new image and drive; no deprovision.
	got := s.deployments.of(h)
	if len(got) != 2 || got[1].op != "Rebuild" || got[1].d.Image.Checksum != s.images["os-2"].Disk ||
		got[1].d.ConfigDrive == nil || string(got[1].d.ConfigDrive.UserData) != string(fb.Data) || got[1].d.Token != token {
		t.Errorf("the Host controller made %+v; want Provision, then one Rebuild with os-2, the new user data and token %s", got, token)
	}
	checkNeverReleased(t, seen(), consumer)

	// The config drive the reimage replaced is swept; the new one stays.
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: s.infra, Name: firstDrive}, &corev1.Secret{})), nil
	}); err != nil {
		t.Errorf("the replaced config drive %s is still there", firstDrive)
	}

	// New first-boot data only: the same image, rebuilt once more with the new drive.
	fb2 := proto.Clone(fb).(*mriv1alpha1.FirstBootConfig)
	fb2.Data = []byte("#cloud-config\nhostname: again\n")
	if _, err := rt.ReimageMachine(ctx, &mriv1alpha1.ReimageMachineRequest{Id: id, Image: other, FirstBoot: fb2}); err != nil {
		t.Fatal(err)
	}
	await(t, rt.Runtime, id, "ran with the new first-boot data", func(m *mriv1alpha1.Machine) bool {
		return isRunning(m) && proto.Equal(m.Spec.FirstBoot, fb2)
	})
	h = s.hostOf(t, id)
	got = s.deployments.of(h)
	if len(got) != 3 || got[2].op != "Rebuild" || string(got[2].d.ConfigDrive.UserData) != string(fb2.Data) || h.Status.RebuildToken != h.Annotations[metalv1alpha1.AnnotationRebuild] {
		t.Errorf("after a reimage to the same image with new data: calls %+v, rebuild token %q of %q; want a third call, a Rebuild with the new data",
			got, h.Status.RebuildToken, h.Annotations[metalv1alpha1.AnnotationRebuild])
	}
	checkNeverReleased(t, seen(), consumer)

	// An image with nothing a server boots is refused before anything changes.
	kernelOnly := &mriv1alpha1.Image{Reference: s.images["kernel-only"].Reference, Digest: s.images["kernel-only"].Digest}
	if _, err := rt.ReimageMachine(ctx, &mriv1alpha1.ReimageMachineRequest{Id: id, Image: kernelOnly}); mri.ReasonOf(err) != mriv1alpha1.ErrorReason_ERROR_REASON_INVALID {
		t.Errorf("ReimageMachine to an image without a disk or an initramfs: %v, want INVALID", err)
	}
	if m, _, _ := rt.machine(id); !proto.Equal(m.Spec.Image, other) {
		t.Errorf("a refused reimage changed the image to %v", m.Spec.Image)
	}

	// A machine being deleted is not reimaged.
	if _, err := rt.DeleteMachine(ctx, &mriv1alpha1.DeleteMachineRequest{Id: id}); err != nil {
		t.Fatal(err)
	}
	_, err = rt.ReimageMachine(ctx, &mriv1alpha1.ReimageMachineRequest{Id: id, Image: before.Spec.Image})
	if mri.ReasonOf(err) != mriv1alpha1.ErrorReason_ERROR_REASON_INVALID {
		t.Errorf("ReimageMachine of a machine being deleted: %v, want INVALID", err)
	}
}

// checkNeverReleased fails unless every version of the Host seen kept the consumer and was
// Provisioned or Provisioning, with no Wiped condition (fake hardware is not wiped: had it
// been released, it would have been Deprovisioning and Available).
func checkNeverReleased(t *testing.T, seen []hostSeen, consumer string) {
	t.Helper()
	if len(seen) == 0 {
		t.Fatal("the watch saw no version of the Host")
	}
	rebuilding := false
	for i, v := range seen {
		rebuilding = rebuilding || v.state == metalv1alpha1.StateProvisioning
		if v.consumer != consumer || v.wiped != "" ||
			(v.state != metalv1alpha1.StateProvisioned && v.state != metalv1alpha1.StateProvisioning) {
			t.Fatalf("version %d of %d of the Host during the reimage: %+v; want consumer %s, Provisioned or Provisioning, no Wiped condition",
				i+1, len(seen), v, consumer)
		}
	}
	if !rebuilding {
		t.Errorf("the watch never saw the Host Provisioning: %+v", seen)
	}
}

// configDriveOf is the Secret the Host's spec.configDrive names.
func configDriveOf(t *testing.T, s *site, h *metalv1alpha1.Host) *corev1.Secret {
	t.Helper()
	sec := &corev1.Secret{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: s.infra, Name: h.Spec.ConfigDrive.Name}, sec); err != nil {
		t.Fatal(err)
	}
	return sec
}

// A real server is not switched between a disk image and a kernel and initramfs in place
// (Ironic deploys them with different deploy interfaces); fake hardware is.
func TestRebuildable(t *testing.T) {
	disk := bootFiles{Disk: v1.Hash{Algorithm: "sha256", Hex: "aa"}}
	ramdisk := bootFiles{Kernel: v1.Hash{Algorithm: "sha256", Hex: "bb"}, Initramfs: v1.Hash{Algorithm: "sha256", Hex: "cc"}}
	host := func(address string, files bootFiles) *metalv1alpha1.Host {
		h := &metalv1alpha1.Host{}
		h.Spec.BMC.Address = address
		h.Spec.Image = files.hostImage(func(hex string) string { return "http://x/" + hex })
		return h
	}
	for _, tc := range []struct {
		name    string
		h       *metalv1alpha1.Host
		files   bootFiles
		refused bool
	}{
		{"disk to disk", host("redfish://bmc/redfish/v1/Systems/1", disk), disk, false},
		{"ramdisk to ramdisk", host("redfish://bmc/redfish/v1/Systems/1", ramdisk), ramdisk, false},
		{"disk to ramdisk", host("redfish://bmc/redfish/v1/Systems/1", disk), ramdisk, true},
		{"ramdisk to disk", host("redfish://bmc/redfish/v1/Systems/1", ramdisk), disk, true},
		{"fake hardware, disk to ramdisk", host("fake://h", disk), ramdisk, false},
	} {
		err := rebuildable(tc.h, tc.files)
		if refused := mri.ReasonOf(err) == mriv1alpha1.ErrorReason_ERROR_REASON_INVALID; refused != tc.refused || (err != nil && !refused) {
			t.Errorf("%s: %v, refused %v", tc.name, err, tc.refused)
		}
	}
}
