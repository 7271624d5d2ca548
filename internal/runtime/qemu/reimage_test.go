package qemu

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

// diskScript is a guest's user data that prints its kernel command line and what the start
// of its root disk (64 MiB) and data disk (16 MiB) holds, then writes a note onto each: a
// reimaged guest shows whether its root disk was made anew and its data disk kept. Disks
// are told apart by size, since the seed is a disk too.
const diskScript = `#!/bin/sh
echo "cmdline: $(cat /proc/cmdline)"
for d in /dev/vd?; do
  case $(blockdev --getsize64 $d) in
  67108864) name=root ;;
  16777216) name=data ;;
  *) continue ;;
  esac
  echo "$name holds [$(dd if=$d bs=32 count=1 2>/dev/null | tr -d '\000')]"
  printf $name-was-written | dd of=$d conv=notrunc 2>/dev/null
done
sync
`

// A running machine reimaged to another image boots that image: its root disk is new, its
// data disk keeps what the guest wrote, its id stays, and the new first-boot config is the
// one read.
func TestReimageBootsTheNewImageAndKeepsDataDisks(t *testing.T) {
	first := pushTestOS(t, computev1alpha1.ArchitectureAMD64)
	second := pushTestOSVariant(t, "second", computev1alpha1.ArchitectureAMD64)
	rt := newRuntime(t, testConfig(t, computev1alpha1.ArchitectureAMD64))
	spec := machineSpec(first, mriv1alpha1.Architecture_ARCHITECTURE_AMD64)
	spec.Volumes = append(spec.Volumes, &mriv1alpha1.Volume{Name: "data", Source: &mriv1alpha1.Volume_EmptyDisk{EmptyDisk: &mriv1alpha1.EmptyDisk{SizeBytes: 16 << 20}}})
	spec.FirstBoot.Data = []byte(diskScript)
	m := create(t, rt, "reimaged", spec)
	id := m.Metadata.Id
	m = await(t, rt, id, "ran", isRunning)
	console := m.Status.Console
	before := scriptOutput(t, console)
	if !strings.Contains(before, "root holds []") || !strings.Contains(before, "data holds []") || strings.Contains(before, "anvil.variant") {
		t.Fatalf("the first boot's script printed:\n%s\nwant both disks empty and no variant on the command line", before)
	}

	fb := &mriv1alpha1.FirstBootConfig{Format: mriv1alpha1.ConfigFormat_CONFIG_FORMAT_CLOUD_INIT, Data: []byte(diskScript + "echo anvil-marker=after-reimage\n")}
	resp, err := rt.ReimageMachine(context.Background(), &mriv1alpha1.ReimageMachineRequest{Id: id,
		Image: &mriv1alpha1.Image{Reference: second.Reference, Digest: second.Digest}, FirstBoot: fb})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Machine.Metadata.Generation <= m.Metadata.Generation {
		t.Fatalf("generation %d after the reimage, want above %d", resp.Machine.Metadata.Generation, m.Metadata.Generation)
	}
	awaitConsoleCount(t, console, "ANVIL-TESTOS-SCRIPT-END", 2)
	after := await(t, rt, id, "ran the new image", isRunning)
	if after.Metadata.Id != id || after.Spec.Image.Digest != second.Digest {
		t.Fatalf("after the reimage: id %s image %v", after.Metadata.Id, after.Spec.Image)
	}
	raw, err := os.ReadFile(console)
	if err != nil {
		t.Fatal(err)
	}
	reimaged := string(raw)[strings.LastIndex(string(raw), "ANVIL-TESTOS-SCRIPT-BEGIN"):]
	for _, want := range []string{"anvil.variant=second", "root holds []", "data holds [data-was-written]"} {
		if !strings.Contains(reimaged, want) {
			t.Errorf("the reimaged guest's script printed:\n%s\nwant %q (the new image's command line, a new root disk, the data disk kept)", reimaged, want)
		}
	}
	awaitConsole(t, console, "marker=after-reimage")
}

// BenchmarkReimageToMarker times a reimage of a running machine until the guest prints
// its new marker, beside a create of the same machine until its marker: both images in
// the cache, so the ratio is the runtime's own (docs/qemu-runtime.md).
//
//	go test -p 1 -run '^$' -bench ReimageToMarker -benchtime 3x ./internal/runtime/qemu/
func BenchmarkReimageToMarker(b *testing.B) {
	images := []testImage{pushTestOS(b, computev1alpha1.ArchitectureAMD64), pushTestOSVariant(b, "other", computev1alpha1.ArchitectureAMD64)}
	cfg := testConfig(b, computev1alpha1.ArchitectureAMD64)
	rt, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close()
	spec := func(img testImage, marker string) *mriv1alpha1.MachineSpec {
		s := machineSpec(img, mriv1alpha1.Architecture_ARCHITECTURE_AMD64)
		s.Hostname = "bench"
		s.FirstBoot.Data = []byte("#cloud-config\n# anvil-marker=" + marker + "\n")
		return s
	}
	for _, img := range images {
		warm(b, rt, spec(img, "warm")) // both images into the cache
	}
	b.Run("create", func(b *testing.B) {
		for i := range b.N {
			marker := fmt.Sprint("create-", i)
			id := benchCreate(b, rt, marker, spec(images[0], marker))
			waitLine(b, ConsoleLogPath(cfg.StateDir, id), "marker="+marker)
			b.StopTimer()
			benchDelete(b, rt, id)
			b.StartTimer()
		}
	})
	b.Run("reimage", func(b *testing.B) {
		b.StopTimer()
		id := benchCreate(b, rt, "reimaged", spec(images[0], "created"))
		waitLine(b, ConsoleLogPath(cfg.StateDir, id), "marker=created")
		b.StartTimer()
		for i := range b.N {
			marker := fmt.Sprint("reimage-", i)
			s := spec(images[(i+1)%2], marker)
			if _, err := rt.ReimageMachine(b.Context(), &mriv1alpha1.ReimageMachineRequest{Id: id, Image: s.Image, FirstBoot: s.FirstBoot}); err != nil {
				b.Fatal(err)
			}
			waitLine(b, ConsoleLogPath(cfg.StateDir, id), "marker="+marker)
		}
		b.StopTimer()
		benchDelete(b, rt, id)
	})
}
