package metalservers

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/internal/bmcemu"
	"github.com/anvil-dev/anvil/test/devproc"
	"github.com/anvil-dev/anvil/test/metalpool"
)

// The emulated server of the wipe test: a second disk of 64 MiB (131072 sectors), which
// the tenants' scripts find by its size.
var wipedServer = bmcemu.Spec{Name: "server-w", CPUs: 2, MemoryMiB: 1024, DiskGiB: 8, DataDiskMiB: 64, MAC: "52:54:00:aa:00:09"}

// findDataDisk is shell that sets $d to the server's 64 MiB writable disk.
const findDataDisk = `d=
for s in /sys/block/vd*; do
	[ "$(cat $s/size)" = 131072 ] && [ "$(cat $s/ro)" = 0 ] && d=/dev/${s##*/}
done
[ -n "$d" ] || { echo "no 64 MiB disk"; exit 3; }
echo "data disk $d"
`

// Tenant A writes a secret at the start of the disk and near its end (partition tables and
// GPT's backup header live there), and a canary in the middle that only a full erase
// clears.
const writeSecret = "#!/bin/sh\n" + findDataDisk + `printf 'ANVIL-SECRET-HEAD-alpha' | dd of=$d bs=512 seek=0 conv=notrunc,fsync 2>/dev/null || exit 4
printf 'ANVIL-SECRET-TAIL-alpha' | dd of=$d bs=512 seek=$((131072 - 16)) conv=notrunc,fsync 2>/dev/null || exit 5
printf 'ANVIL-CANARY-MIDDLE' | dd of=$d bs=512 seek=65536 conv=notrunc,fsync 2>/dev/null || exit 6
sync
echo "wrote the secret to $d"
`

// Tenant B reads the whole disk and prints every secret it finds.
const searchSecret = "#!/bin/sh\n" + findDataDisk + `echo "searching $d"
strings $d | grep ANVIL-SECRET | sed 's/^/FOUND: /'
echo "searched $d"
`

// A tenant's Machine writes a secret to its server's second disk and is deleted; the next
// tenant's Machine on the same server searches that disk and must find nothing: the
// released Host is wiped (the site's eraser, deployed by Ironic, zeroes the first and last
// MiB of every disk and powers off) before it is Available again, and is never Available
// in between — not even when Ironic is killed and loses its database mid-wipe.
func TestReleasedServerIsWipedBeforeTheNextTenant(t *testing.T) {
	tt := startTwoTenants(t, wipedServer, "emulated-wiped", "wiped")
	infra, tenantA, tenantB, e, class := tt.infra, tt.a, tt.b, tt.e, tt.class
	console := e.ConsolePath(wipedServer.Name)
	image := pushTestOS(t, computev1alpha1.ArchitectureAMD64)
	rig.WaitHost(t, infra, wipedServer.Name, "Available", 3*time.Minute, metalpool.InState(metalv1alpha1.StateAvailable))

	run := func(ns, name, script string, n int) string {
		t.Helper()
		ud := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-user-data"},
			Data: map[string][]byte{"userData": []byte(script)}}
		m := &computev1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: computev1alpha1.MachineSpec{MachineClassRef: computev1alpha1.MachineClassReference{Name: class.Name}, Image: image,
				UserDataRef: &computev1alpha1.SecretKeySelector{Name: ud.Name, Key: "userData"}}}
		rig.Create(t, ud, m)
		out := waitConsole(t, console, "ANVIL-TESTOS-SCRIPT-END", n, 5*time.Minute)
		begin := strings.LastIndex(out, "ANVIL-TESTOS-SCRIPT-BEGIN")
		return out[begin:]
	}

	// Tenant A leaves a secret on the disk.
	out := run(tenantA, "alpha", writeSecret, 1)
	if !strings.Contains(out, "wrote the secret to /dev/vd") || !strings.Contains(out, "ANVIL-TESTOS-SCRIPT-END rc=0") {
		t.Fatalf("tenant A's script did not write its secret:\n%s", out)
	}
	// Its server's serial console, as the metal runtime keeps it for tenant A's machine.
	alphaLog := machineConsoleLog(t, tt.pool.ConsoleDir, tenantA, "alpha", "wrote the secret to /dev/vd")
	// Deleting the Machine waits for the release; meanwhile, once the eraser is on its way,
	// Ironic is killed and loses its database: the Host must still not be handed out unwiped.
	go deleteMachineLater(tenantA, "alpha")
	rig.WaitHost(t, infra, wipedServer.Name, "wiping", 5*time.Minute, func(h *metalv1alpha1.Host) bool {
		c := meta.FindStatusCondition(h.Status.Conditions, metalv1alpha1.ConditionWiped)
		return c != nil && c.Reason == metalv1alpha1.ReasonWiping
	})
	ironicLosesItsDatabase(t, tt.pool)

	// Released: not Available until wiped. Watched until the Host is Available and free.
	// The Machine is gone once its server is released.
	var sawWiping, availableUnwiped bool
	h := rig.WaitHost(t, infra, wipedServer.Name, "wiped, Available and free again", 5*time.Minute, func(h *metalv1alpha1.Host) bool {
		c := meta.FindStatusCondition(h.Status.Conditions, metalv1alpha1.ConditionWiped)
		if c != nil && c.Reason == metalv1alpha1.ReasonWiping {
			sawWiping = true
		}
		if h.Status.ProvisioningState == metalv1alpha1.StateAvailable && (c == nil || c.Status != metav1.ConditionTrue) {
			availableUnwiped = true
		}
		return metalpool.InState(metalv1alpha1.StateAvailable)(h) && h.Spec.ConsumerRef == nil && h.Status.Image == nil
	})
	deleteMachine(t, tenantA, "alpha", 5*time.Minute)
	if _, err := os.Stat(alphaLog); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("tenant A's console log %s outlived its machine: %v", alphaLog, err)
	}
	if availableUnwiped {
		t.Errorf("the Host was Available before it was wiped")
	}
	if c := meta.FindStatusCondition(h.Status.Conditions, metalv1alpha1.ConditionWiped); c == nil || c.Status != metav1.ConditionTrue || c.Reason != metalv1alpha1.ReasonWiped {
		t.Errorf("the released Host's Wiped condition is %+v, want True (%s); Wiping seen: %v", c, metalv1alpha1.ReasonWiped, sawWiping)
	}
	raw, _ := os.ReadFile(console)
	if !strings.Contains(string(raw), "ANVIL-ERASER-DONE disks=") {
		t.Errorf("the eraser did not run on the server; console:\n%s", devproc.LastLines(string(raw), 30))
	}
	// The disk itself, read from outside while the server is off: the first and the last MiB
	// are zero, as the eraser promises; the middle, which only a full erase clears, not.
	checkErased(t, e.DataDiskPath(wipedServer.Name), wipedServer.DataDiskMiB<<20)

	// Tenant B searches the disk.
	out = run(tenantB, "beta", searchSecret, 2)
	if !strings.Contains(out, "searched /dev/vd") {
		t.Fatalf("tenant B's script did not search the disk:\n%s", out)
	}
	if strings.Contains(out, "FOUND:") || strings.Contains(out, "alpha") {
		t.Errorf("tenant B found tenant A's secret on the server's disk:\n%s", out)
	}
	// Tenant B's console log is its own: nothing tenant A's machine printed, nor the wipe's.
	betaLog := machineConsoleLog(t, tt.pool.ConsoleDir, tenantB, "beta", "searched /dev/vd")
	if raw, _ := os.ReadFile(betaLog); strings.Contains(string(raw), "wrote the secret") || strings.Contains(string(raw), "ANVIL-ERASER") {
		t.Errorf("tenant B's console log holds what came before its machine:\n%s", devproc.LastLines(string(raw), 30))
	}
	deleteMachine(t, tenantB, "beta", 5*time.Minute)
}

// deleteMachineLater deletes a Machine without waiting (its deletion waits for the wipe).
func deleteMachineLater(ns, name string) {
	_ = rig.Env.Client.Delete(context.Background(), &computev1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
}

// checkErased fails unless the first and last MiB of the disk file are zero and the
// canary tenant A wrote in the middle is still there.
func checkErased(t *testing.T, path string, size int64) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("the data disk: %v", err)
	}
	defer f.Close()
	mib := int64(1 << 20)
	zero := make([]byte, mib)
	for _, at := range []int64{0, size - mib} {
		b := make([]byte, mib)
		if _, err := f.ReadAt(b, at); err != nil && err != io.EOF {
			t.Fatal(err)
		}
		if !bytes.Equal(b, zero) {
			i := bytes.IndexFunc(b, func(r rune) bool { return r != 0 })
			t.Errorf("the MiB at byte %d of the data disk is not zero (byte %d: %q)", at, at+int64(i), b[i:min(i+32, len(b))])
		}
	}
	b := make([]byte, 512)
	if _, err := f.ReadAt(b, 65536*512); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("ANVIL-CANARY-MIDDLE")) {
		t.Errorf("the middle of the data disk was changed (%q): the metadata erase touches only the first and last MiB", b[:32])
	}
}

// machineConsoleLog is the path of Machine ns/name's console log in the metal runtime's
// dir, once it holds want.
func machineConsoleLog(t *testing.T, dir, ns, name, want string) string {
	t.Helper()
	m := &computev1alpha1.Machine{}
	if err := rig.Env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, m); err != nil || m.Status.MachineID == "" {
		t.Fatalf("Machine %s/%s's machine id: %v %q", ns, name, err, m.Status.MachineID)
	}
	path := filepath.Join(dir, m.Status.MachineID+".log")
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(250 * time.Millisecond) {
		raw, _ := os.ReadFile(path)
		if strings.Contains(string(raw), want) {
			return path
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/%s's console log %s never held %q:\n%s", ns, name, path, want, devproc.LastLines(string(raw), 30))
		}
	}
}
