package osimage_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/buildagent"
	osimagecontroller "github.com/anvil-dev/anvil/internal/controller/osimage"
	"github.com/anvil-dev/anvil/internal/imagebuild"
	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/test/testos"
)

// pushDiskOnly publishes an image whose amd64 entry is a disk and nothing else: no kernel
// to boot. It returns its reference.
func pushDiskOnly(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "disk.raw"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	ref := env.Registry.Host + "/anvil/disk-only:1"
	if _, _, err := osimage.PushDirs(context.Background(), ref, map[computev1alpha1.Architecture]string{"amd64": dir}, nil); err != nil {
		t.Fatal(err)
	}
	return ref
}

// pushDiskRoot publishes the test OS's kernel and initramfs with a qcow2 disk of
// virtualSize bytes (as Debian's disk form), and returns its reference.
func pushDiskRoot(t *testing.T, virtualSize string) string {
	t.Helper()
	dir := t.TempDir()
	tos := filepath.Join(testos.Dir(t), "amd64")
	for _, f := range []string{"kernel", "initramfs", "cmdline"} {
		b, err := os.ReadFile(filepath.Join(tos, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("qemu-img", "create", "-f", "qcow2", filepath.Join(dir, "disk.qcow2"), virtualSize).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img create (qemu-utils is needed): %v\n%s", err, out)
	}
	ref := env.Registry.Host + "/anvil/disk-root:1"
	if _, _, err := osimage.PushDirs(context.Background(), ref, map[computev1alpha1.Architecture]string{"amd64": dir}, nil); err != nil {
		t.Fatal(err)
	}
	return ref
}

// A base with a disk root: the builder gets a blank disk of the base disk's virtual size
// (from the qcow2 header, the layer is not pulled) and its job says so, with the package
// proxy its RUN steps get.
func TestADiskRootBaseGivesTheBuilderAScratchDisk(t *testing.T) {
	setup(t, func(c *osimagecontroller.Config) { c.PackageProxy = "10.0.2.101:3128" })
	ctx := context.Background()
	o := recipe("disk-root", pushDiskRoot(t, "96M"), "amd64")
	o.Spec.Containerfiles[0].Content = "RUN apt-get update && apt-get install -y hello\n"
	if err := env.Client.Create(ctx, o); err != nil {
		t.Fatal(err)
	}
	var ms []computev1alpha1.Machine
	eventually(t, "a builder", func() (bool, string) {
		ms = machinesOf(t, o.Name)
		return len(ms) == 1, ""
	})
	m := ms[0]
	if len(m.Spec.Volumes) != 1 || m.Spec.Volumes[0].EmptyDisk == nil || m.Spec.Volumes[0].EmptyDisk.Size.Value() != 96<<20 {
		t.Fatalf("builder volumes %+v, want one blank disk of 96 MiB", m.Spec.Volumes)
	}
	jobs := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: imagebuild.JobSecretName(m.Labels["images.anvil.dev/build"])}, jobs); err != nil {
		t.Fatal(err)
	}
	var job buildagent.Job
	if err := json.Unmarshal(jobs.Data["amd64"], &job); err != nil {
		t.Fatal(err)
	}
	if job.RootDiskBytes != 96<<20 || job.PackageProxy != "10.0.2.101:3128" {
		t.Errorf("job: rootDiskBytes %d, packageProxy %q; want 96 MiB and the proxy", job.RootDiskBytes, job.PackageProxy)
	}
}
