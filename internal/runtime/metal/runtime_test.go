package metal

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/runtime/metal/placement"
)

var (
	isRunning  = settledIn(mriv1alpha1.MachineState_MACHINE_STATE_RUNNING)
	isShutdown = settledIn(mriv1alpha1.MachineState_MACHINE_STATE_SHUTDOWN)
)

func gone(m *mriv1alpha1.Machine) bool { return m == nil }

func createMachine(t *testing.T, rt *Runtime, m *mriv1alpha1.Machine) *mriv1alpha1.Machine {
	t.Helper()
	resp, err := rt.CreateMachine(context.Background(), &mriv1alpha1.CreateMachineRequest{Machine: m})
	if err != nil {
		t.Fatalf("CreateMachine: %v", err)
	}
	return resp.Machine
}

// hostOf is the Host holding machine id.
func (s *site) hostOf(t *testing.T, id string) *metalv1alpha1.Host {
	t.Helper()
	var hosts metalv1alpha1.HostList
	if err := env.Client.List(context.Background(), &hosts, client.InNamespace(s.infra)); err != nil {
		t.Fatal(err)
	}
	for i := range hosts.Items {
		if rec, _, _ := decodeRecord(&hosts.Items[i]); rec != nil && rec.ID == id {
			return &hosts.Items[i]
		}
	}
	t.Fatalf("no Host holds machine %s", id)
	return nil
}

// configDrives lists the runtime's Secrets in the infrastructure namespace.
func (s *site) configDrives(t *testing.T) []corev1.Secret {
	t.Helper()
	var list corev1.SecretList
	if err := env.Client.List(context.Background(), &list, client.InNamespace(s.infra), client.HasLabels{LabelConfigDrive}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func TestRefusals(t *testing.T) {
	s := newSite(t, 2)
	rt := s.mustStart(t)
	ctx := context.Background()
	labelled := newNamespace(t, "labelled", map[string]string{"team": "metal"})
	create(t, &metalv1alpha1.HostPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: s.infra, Name: "by-label"},
		Spec: metalv1alpha1.HostPolicySpec{HostSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"rack": "1"}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "metal"}}}})
	for _, tc := range []struct {
		name   string
		change func(*mriv1alpha1.Machine)
		reason mriv1alpha1.ErrorReason
		says   string
	}{
		{"no namespace label", func(m *mriv1alpha1.Machine) { delete(m.Metadata.Labels, LabelMachineNamespace) },
			mriv1alpha1.ErrorReason_ERROR_REASON_INVALID, "anvil.dev/machine-namespace"},
		{"namespace no policy allows", func(m *mriv1alpha1.Machine) { m.Metadata.Labels[LabelMachineNamespace] = "stranger" },
			mriv1alpha1.ErrorReason_ERROR_REASON_NO_CAPACITY, "no HostPolicy lets namespace stranger use a Host that fits class small"},
		{"namespace allowed on other hosts only", func(m *mriv1alpha1.Machine) {
			m.Metadata.Labels[LabelMachineNamespace] = labelled
			m.Spec.HostSelector = map[string]string{"rack": "0"}
		}, mriv1alpha1.ErrorReason_ERROR_REASON_NO_CAPACITY, "no HostPolicy lets namespace " + labelled + " use a Host that fits class small and hostSelector {rack=0}"},
		{"host selector", func(m *mriv1alpha1.Machine) { m.Spec.HostSelector = map[string]string{"rack": "7"} },
			mriv1alpha1.ErrorReason_ERROR_REASON_NO_CAPACITY, "no amd64 Host that fits class small matches hostSelector {rack=7}"},
		{"too big", func(m *mriv1alpha1.Machine) { m.Spec.Resources.MilliCpu = 16000 },
			mriv1alpha1.ErrorReason_ERROR_REASON_NO_CAPACITY, "no amd64 Host fits class small (needs 16 cpu and 1Gi memory)"},
		{"two hosts", func(m *mriv1alpha1.Machine) { m.Spec.Resources.Extended = map[string]int64{placement.ResourceHosts: 2} },
			mriv1alpha1.ErrorReason_ERROR_REASON_NO_CAPACITY, "2 anvil.dev/hosts, which no Host offers"},
		{"architecture the pool lacks", func(m *mriv1alpha1.Machine) { m.Spec.Architecture = mriv1alpha1.Architecture_ARCHITECTURE_ARM64 },
			mriv1alpha1.ErrorReason_ERROR_REASON_WRONG_ARCHITECTURE, "not arm64"},
		{"image without the architecture", func(m *mriv1alpha1.Machine) {
			m.Spec.Image = &mriv1alpha1.Image{Reference: s.images["arm-only"].Reference, Digest: s.images["arm-only"].Digest}
		}, mriv1alpha1.ErrorReason_ERROR_REASON_WRONG_ARCHITECTURE, "the index offers [linux/arm64]"},
		{"image with nothing a server boots", func(m *mriv1alpha1.Machine) {
			m.Spec.Image = &mriv1alpha1.Image{Reference: s.images["kernel-only"].Reference, Digest: s.images["kernel-only"].Digest}
		}, mriv1alpha1.ErrorReason_ERROR_REASON_INVALID, "no disk layer and no kernel with an initramfs"},
		{"image that does not exist", func(m *mriv1alpha1.Machine) { m.Spec.Image.Digest = "sha256:" + strings.Repeat("0", 64) },
			mriv1alpha1.ErrorReason_ERROR_REASON_IMAGE_NOT_FOUND, "image not found"},
		{"binary user data", func(m *mriv1alpha1.Machine) {
			m.Spec.FirstBoot = &mriv1alpha1.FirstBootConfig{Format: mriv1alpha1.ConfigFormat_CONFIG_FORMAT_CLOUD_INIT, Data: []byte{0x1f, 0x8b, 0x08, 0x00, 0xff, 0xfe}}
		}, mriv1alpha1.ErrorReason_ERROR_REASON_INVALID, "is not UTF-8 text"},
		{"empty disk", func(m *mriv1alpha1.Machine) {
			m.Spec.Volumes = append(m.Spec.Volumes, &mriv1alpha1.Volume{Name: "data", Source: &mriv1alpha1.Volume_EmptyDisk{EmptyDisk: &mriv1alpha1.EmptyDisk{SizeBytes: 1}}})
		}, mriv1alpha1.ErrorReason_ERROR_REASON_INVALID, "only the image disk"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := s.machine("refused", s.spec("os"))
			tc.change(m)
			_, err := rt.CreateMachine(ctx, &mriv1alpha1.CreateMachineRequest{Machine: m})
			if mri.ReasonOf(err) != tc.reason || !strings.Contains(mri.MessageOf(err), tc.says) {
				t.Fatalf("CreateMachine = %v, want %s saying %q", err, tc.reason, tc.says)
			}
		})
	}
	if d := s.configDrives(t); len(d) != 0 {
		t.Fatalf("refused creates left %d config drives", len(d))
	}

	// A namespace allowed by label gets the Host its policy covers; then every Host is in use.
	m := s.machine("by-label", s.spec("os"))
	m.Metadata.Labels[LabelMachineNamespace] = labelled
	byLabel := createMachine(t, rt.Runtime, m)
	if h := s.hostOf(t, byLabel.Metadata.Id); h.Labels["rack"] != "1" {
		t.Fatalf("namespace %s got Host %s of rack %s, its policy covers rack 1 only", labelled, h.Name, h.Labels["rack"])
	}
	createMachine(t, rt.Runtime, s.machine("second", s.spec("os")))
	_, err := rt.CreateMachine(ctx, &mriv1alpha1.CreateMachineRequest{Machine: s.machine("third", s.spec("os"))})
	if want := "every Host that fits class small and namespace " + s.tenant + " may use is in use"; mri.ReasonOf(err) != mriv1alpha1.ErrorReason_ERROR_REASON_NO_CAPACITY || !strings.Contains(mri.MessageOf(err), want) {
		t.Fatalf("CreateMachine on a full pool = %v, want NO_CAPACITY saying %q", err, want)
	}
}

// Two runtimes on one namespace (a new process starting before the old one stops) claim
// with optimistic concurrency: every machine gets its own Host, none is refused while a
// Host is free.
func TestConcurrentClaims(t *testing.T) {
	const perRuntime = 4
	s := newSite(t, 2*perRuntime)
	a := s.mustStart(t)
	b, err := s.startOn(freeAddress(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	var wg sync.WaitGroup
	ids := make(chan string, 2*perRuntime)
	for i, rt := range []*running{a, b, a, b, a, b, a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := rt.CreateMachine(context.Background(), &mriv1alpha1.CreateMachineRequest{Machine: s.machine(fmt.Sprintf("m%d", i), s.spec("os"))})
			if err != nil {
				t.Errorf("CreateMachine %d: %v", i, err)
				return
			}
			ids <- resp.Machine.Metadata.Id
		}()
	}
	wg.Wait()
	close(ids)
	hosts := map[string]string{}
	for id := range ids {
		h := s.hostOf(t, id)
		if other, taken := hosts[h.Name]; taken {
			t.Fatalf("Host %s holds machines %s and %s", h.Name, other, id)
		}
		hosts[h.Name] = id
	}
	if len(hosts) != 2*perRuntime {
		t.Fatalf("%d Hosts claimed, want %d", len(hosts), 2*perRuntime)
	}
	_, err = a.CreateMachine(context.Background(), &mriv1alpha1.CreateMachineRequest{Machine: s.machine("one-too-many", s.spec("os"))})
	if mri.ReasonOf(err) != mriv1alpha1.ErrorReason_ERROR_REASON_NO_CAPACITY {
		t.Fatalf("CreateMachine on a full pool = %v, want NO_CAPACITY", err)
	}
}

// A machine's life as the Host and its tenant see it: the claim, the config drive, the
// tenant's copy of the hardware, power, reboot, and everything gone after delete.
func TestMachineOnItsHost(t *testing.T) {
	s := newSite(t, 1)
	rt := s.mustStart(t)
	ctx := context.Background()
	obj := &computev1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: s.tenant, Name: "web"},
		Spec: computev1alpha1.MachineSpec{MachineClassRef: computev1alpha1.MachineClassReference{Name: "small"}, Image: s.images["os"].Reference}}
	create(t, obj)
	m := s.machine("web", s.spec("os"))
	m.Metadata.Labels[mri.LabelMachineUID] = string(obj.UID)
	m.Spec.Hostname = "web-1.example"
	id := createMachine(t, rt.Runtime, m).Metadata.Id
	await(t, rt.Runtime, id, "ran", isRunning)

	h := s.hostOf(t, id)
	// What a person reads on the Host: kubectl get events.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		var list corev1.EventList
		if err := env.Client.List(ctx, &list, client.InNamespace(s.infra)); err != nil {
			return false, err
		}
		var reasons []string
		for _, e := range list.Items {
			if e.InvolvedObject.UID == h.UID {
				reasons = append(reasons, e.Reason)
			}
		}
		got := strings.Join(reasons, " ")
		return strings.Contains(got, "Registered") && strings.Contains(got, "Inspected") && strings.Contains(got, "Provisioned"), nil
	}); err != nil {
		t.Errorf("the Host's Events lack Registered, Inspected and Provisioned: %v", err)
	}
	if h.Spec.ConsumerRef == nil || h.Spec.ConsumerRef.Namespace != s.tenant || h.Spec.ConsumerRef.Name != "web" || h.Spec.ConsumerRef.UID != string(obj.UID) {
		t.Errorf("consumerRef %+v", h.Spec.ConsumerRef)
	}
	img := h.Spec.Image
	if img == nil || img.Checksum != s.images["os"].Disk || img.Format != metalv1alpha1.ImageFormatRaw || img.URL != rt.ImageURL()+imagePath+strings.TrimPrefix(img.Checksum, "sha256:") || !h.Spec.Online {
		t.Errorf("Host spec %+v, want the os disk from %s, online", h.Spec, rt.ImageURL())
	}
	sec := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: s.infra, Name: h.Spec.ConfigDrive.Name}, sec); err != nil {
		t.Fatal(err)
	}
	var meta map[string]string
	if err := json.Unmarshal(sec.Data["meta_data"], &meta); err != nil {
		t.Fatal(err)
	}
	if string(sec.Data["user_data"]) != string(m.Spec.FirstBoot.Data) || meta["uuid"] != string(obj.UID) || meta["hostname"] != "web-1.example" || meta["name"] != "web" {
		t.Errorf("config drive user_data %q meta_data %v", sec.Data["user_data"], meta)
	}

	// The tenant's copy: its Machine's name, owned by it, nothing of the Host.
	hw := &metalv1alpha1.HardwareData{}
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: s.tenant, Name: "web"}, hw) == nil, nil
	}); err != nil {
		t.Fatal("no HardwareData in the tenant's namespace")
	}
	src := &metalv1alpha1.HardwareData{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: s.infra, Name: h.Name}, src); err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(hw)
	if hw.Labels[metalv1alpha1.LabelMachine] != "web" || len(hw.OwnerReferences) != 1 || hw.OwnerReferences[0].UID != obj.UID ||
		hw.Spec.CPU.Count != src.Spec.CPU.Count || hw.Spec.MemoryMiB != src.Spec.MemoryMiB || len(hw.Spec.Disks) != 1 {
		t.Errorf("tenant HardwareData %s", raw)
	}
	for _, leak := range []string{s.infra, h.Name, "fake://"} {
		if strings.Contains(string(raw), leak) {
			t.Errorf("tenant HardwareData names %q: %s", leak, raw)
		}
	}

	// Power and reboot reach the Host.
	if _, err := rt.UpdateMachinePower(ctx, &mriv1alpha1.UpdateMachinePowerRequest{Id: id, Power: mriv1alpha1.Power_POWER_OFF}); err != nil {
		t.Fatal(err)
	}
	await(t, rt.Runtime, id, "shut down", isShutdown)
	if s.host(h.Name).Spec.Online {
		t.Error("power off left the Host online")
	}
	if _, err := rt.RebootMachine(ctx, &mriv1alpha1.RebootMachineRequest{Id: id, Token: "t1"}); err != nil {
		t.Fatal(err)
	}
	if got := s.host(h.Name).Annotations[AnnotationReboot]; got != "t1" {
		t.Errorf("reboot annotation %q, want t1", got)
	}

	// Delete: the Host is deprovisioned, then released with nothing of the machine left.
	if _, err := rt.DeleteMachine(ctx, &mriv1alpha1.DeleteMachineRequest{Id: id}); err != nil {
		t.Fatal(err)
	}
	await(t, rt.Runtime, id, "went away", gone)
	h = s.host(h.Name)
	if h.Spec.ConsumerRef != nil || h.Spec.Image != nil || h.Spec.ConfigDrive != nil || h.Spec.Online || h.Annotations[AnnotationMachine] != "" || h.Annotations[AnnotationReboot] != "" {
		t.Errorf("released Host still carries the machine: %+v %v", h.Spec, h.Annotations)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sec), &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("config drive after delete: %v", err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(hw), &metalv1alpha1.HardwareData{}); !apierrors.IsNotFound(err) {
		t.Errorf("tenant HardwareData after delete: %v", err)
	}
}

func TestImageServer(t *testing.T) {
	s := newSite(t, 1)
	rt := s.mustStart(t)
	id := createMachine(t, rt.Runtime, s.machine("m", s.spec("os"))).Metadata.Id
	url := s.hostOf(t, id).Spec.Image.URL
	get := func(url string, header ...string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	code, body := get(url)
	sum := sha256.Sum256(body)
	if code != http.StatusOK || "sha256:"+hex.EncodeToString(sum[:]) != s.images["os"].Disk {
		t.Fatalf("GET %s: %d, %d bytes of another checksum", url, code, len(body))
	}
	if code, body := get(url, "Range", "bytes=10-19"); code != http.StatusPartialContent || len(body) != 10 {
		t.Errorf("range: %d, %d bytes", code, len(body))
	}
	other := strings.TrimPrefix(s.images["arm-only"].Disk, "sha256:")
	for _, u := range []string{rt.ImageURL() + imagePath + other, rt.ImageURL() + imagePath + "nothex", rt.ImageURL() + "/"} {
		if code, _ := get(u); code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404: only disks of claimed Hosts are served", u, code)
		}
	}
	if resp, err := http.Post(url, "text/plain", strings.NewReader("x")); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %v %v", resp, err)
	}
	if _, err := rt.DeleteMachine(context.Background(), &mriv1alpha1.DeleteMachineRequest{Id: id}); err != nil {
		t.Fatal(err)
	}
	await(t, rt.Runtime, id, "went away", gone)
	if code, _ := get(url); code != http.StatusNotFound {
		t.Errorf("GET after delete: %d, want 404", code)
	}
}

// A restart finishes what the last process left: a config drive whose create never
// claimed a Host is removed, and a delete interrupted before the release completes.
func TestRestartFinishesLeftovers(t *testing.T) {
	s := newSite(t, 2)
	s.sweepGrace = time.Second
	rt, err := s.start()
	if err != nil {
		t.Fatal(err)
	}
	orphan, err := configDriveSecret(s.infra, "metal-crashed", map[string]string{mri.LabelMachineUID: "crashed"}, s.spec("os"), nil)
	if err != nil {
		t.Fatal(err)
	}
	create(t, orphan)
	kept := createMachine(t, rt.Runtime, s.machine("kept", s.spec("os"))).Metadata.Id
	deleted := createMachine(t, rt.Runtime, s.machine("deleted", s.spec("os"))).Metadata.Id
	await(t, rt.Runtime, deleted, "ran", isRunning)
	if _, err := rt.DeleteMachine(context.Background(), &mriv1alpha1.DeleteMachineRequest{Id: deleted}); err != nil {
		t.Fatal(err)
	}
	rt.Close()

	rt = s.mustStart(t)
	await(t, rt.Runtime, deleted, "went away after the restart", gone)
	await(t, rt.Runtime, kept, "ran after the restart", isRunning)
	err = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		return len(s.configDrives(t)) == 1, nil
	})
	if d := s.configDrives(t); err != nil || d[0].Annotations[AnnotationMachineID] != kept {
		t.Fatalf("config drives after the restart: %v, want only machine %s's", d, kept)
	}
}

func TestStatus(t *testing.T) {
	s := newSite(t, 3)
	rt := s.mustStart(t)
	fits := &computev1alpha1.MachineClass{ObjectMeta: metav1.ObjectMeta{Name: "fits-" + s.infra},
		Capabilities: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("16Gi"), placement.ResourceHosts: resource.MustParse("1")}}
	tooBig := &computev1alpha1.MachineClass{ObjectMeta: metav1.ObjectMeta{Name: "too-big-" + s.infra},
		Capabilities: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("9"), corev1.ResourceMemory: resource.MustParse("1Gi")}}
	create(t, fits, tooBig)
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), fits)
		_ = env.Client.Delete(context.Background(), tooBig)
	})
	want := &mriv1alpha1.Resources{MilliCpu: 24000, MemoryBytes: 48 << 30, Extended: map[string]int64{placement.ResourceHosts: 3}}
	check := func(when string) {
		t.Helper()
		var st *mriv1alpha1.StatusResponse
		err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			var err error
			st, err = rt.Status(ctx, &mriv1alpha1.StatusRequest{})
			return err == nil && st.Allocatable.MilliCpu == want.MilliCpu && st.Allocatable.MemoryBytes == want.MemoryBytes &&
				st.Allocatable.Extended[placement.ResourceHosts] == 3, err
		})
		if err != nil {
			t.Fatalf("%s: Status %v, want allocatable %v", when, st, want)
		}
		supported := strings.Join(st.SupportedClasses, " ")
		if !strings.Contains(supported, fits.Name) || strings.Contains(supported, tooBig.Name) {
			t.Errorf("%s: supported classes %v, want %s and not %s", when, st.SupportedClasses, fits.Name, tooBig.Name)
		}
		if len(st.Architectures) != 1 || st.Architectures[0] != mriv1alpha1.Architecture_ARCHITECTURE_AMD64 {
			t.Errorf("%s: architectures %v", when, st.Architectures)
		}
	}
	check("empty pool")
	id := createMachine(t, rt.Runtime, s.machine("m", s.spec("os"))).Metadata.Id
	await(t, rt.Runtime, id, "ran", isRunning)
	check("one Host held") // allocatable is never reduced by machines
}
