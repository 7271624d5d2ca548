package qemu

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/test/testos"
)

// BenchmarkCreateToMarker times CreateMachine until the guest prints its marker line, with
// the image already in the cache: the runtime's share of a Machine's start, to compare
// with the same QEMU command line run by hand (docs/qemu-runtime.md).
//
//	go test -p 1 -run '^$' -bench CreateToMarker -benchtime 3x ./internal/runtime/qemu/
func BenchmarkCreateToMarker(b *testing.B) {
	img := pushTestOS(b, computev1alpha1.ArchitectureAMD64, computev1alpha1.ArchitectureARM64)
	cfg := testConfig(b, computev1alpha1.ArchitectureAMD64, computev1alpha1.ArchitectureARM64)
	rt, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close()
	for _, arch := range []mriv1alpha1.Architecture{mriv1alpha1.Architecture_ARCHITECTURE_AMD64, mriv1alpha1.Architecture_ARCHITECTURE_ARM64} {
		b.Run(arch.String(), func(b *testing.B) {
			line := testos.ReadyLine(archOf(arch), "bench", "bench")
			spec := machineSpec(img, arch)
			spec.Hostname = "bench"
			spec.FirstBoot.Data = []byte("#cloud-config\n# anvil-marker=bench\n")
			warm(b, rt, spec) // the first pull fills the cache
			b.ResetTimer()
			for i := range b.N {
				id := benchCreate(b, rt, fmt.Sprintf("%s-%d", arch, i), spec)
				waitLine(b, ConsoleLogPath(cfg.StateDir, id), line)
				b.StopTimer()
				benchDelete(b, rt, id)
				b.StartTimer()
			}
		})
	}
}

func archOf(a mriv1alpha1.Architecture) computev1alpha1.Architecture { return mri.ArchFromMRI(a) }

func warm(b *testing.B, rt *Runtime, spec *mriv1alpha1.MachineSpec) {
	id := benchCreate(b, rt, "warm-"+spec.Architecture.String(), spec)
	deadline := time.Now().Add(bootTimeout)
	for time.Now().Before(deadline) {
		if m := getMachine(rt, id); m != nil && m.Status.State == mriv1alpha1.MachineState_MACHINE_STATE_RUNNING {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	benchDelete(b, rt, id)
}

func benchCreate(b *testing.B, rt *Runtime, uid string, spec *mriv1alpha1.MachineSpec) string {
	resp, err := rt.CreateMachine(b.Context(), &mriv1alpha1.CreateMachineRequest{Machine: &mriv1alpha1.Machine{
		Metadata: &mriv1alpha1.ObjectMetadata{Labels: map[string]string{mri.LabelMachineUID: uid}}, Spec: spec}})
	if err != nil {
		b.Fatal(err)
	}
	return resp.Machine.Metadata.Id
}

func benchDelete(b *testing.B, rt *Runtime, id string) {
	if _, err := rt.DeleteMachine(b.Context(), &mriv1alpha1.DeleteMachineRequest{Id: id}); err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(bootTimeout)
	for getMachine(rt, id) != nil {
		if time.Now().After(deadline) {
			b.Fatalf("machine %s not deleted", id)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func getMachine(rt *Runtime, id string) *mriv1alpha1.Machine {
	resp, err := rt.ListMachines(context.Background(), &mriv1alpha1.ListMachinesRequest{Id: id})
	if err != nil || len(resp.Machines) == 0 {
		return nil
	}
	return resp.Machines[0]
}

func waitLine(b *testing.B, path, line string) {
	deadline := time.Now().Add(bootTimeout)
	for time.Now().Before(deadline) {
		if raw, _ := os.ReadFile(path); strings.Contains(string(raw), line) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.Fatalf("no %q on %s", line, path)
}
