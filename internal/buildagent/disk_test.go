package buildagent

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	imagesv1alpha1 "github.com/anvil-dev/anvil/api/images/v1alpha1"
	"github.com/anvil-dev/anvil/internal/imagebuild"
	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/test/testos"
)

// diskRootSize is the test base's disk: small, and a multiple of the qcow2 cluster.
const diskRootSize = 64 << 20

func mustRun(t *testing.T, name string, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Fatalf("%s is missing: %v", name, err)
	}
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// pushDiskBase publishes the test OS's root as a disk root: one ext4 filesystem in a
// compressed qcow2 disk, with the test OS's kernel and initramfs beside it, as Debian's
// disk form is laid out. It returns the pinned index.
func (f *fixture) pushDiskBase(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	tos := filepath.Join(testos.Dir(t), "amd64")
	root := filepath.Join(dir, "root")
	if _, err := unpackFile(filepath.Join(tos, "initramfs"), root); err != nil {
		t.Fatal(err)
	}
	// A /boot as a kernel package leaves it, with the root's links to it.
	if err := os.MkdirAll(filepath.Join(root, "boot"), 0o755); err != nil {
		t.Fatal(err)
	}
	for from, to := range map[string]string{"kernel": "boot/vmlinuz-1", "initramfs": "boot/initrd.img-1"} {
		if err := copyFile(filepath.Join(tos, from), filepath.Join(root, to)); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range [][2]string{{"boot/vmlinuz-1", "vmlinuz"}, {"boot/initrd.img-1", "initrd.img"}} {
		if err := os.Symlink(l[0], filepath.Join(root, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	raw := filepath.Join(dir, "disk.raw")
	mustRun(t, "mke2fs", "-q", "-t", "ext4", "-d", root, "-L", "anvil-root", raw, "64M")
	img := filepath.Join(dir, "img")
	if err := os.MkdirAll(img, 0o755); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "qemu-img", "convert", "-c", "-f", "raw", "-O", "qcow2", raw, filepath.Join(img, "disk.qcow2"))
	for _, f := range []string{"kernel", "initramfs", "cmdline"} {
		if err := copyFile(filepath.Join(tos, f), filepath.Join(img, f)); err != nil {
			t.Fatal(err)
		}
	}
	pinned, _, err := osimage.PushDirs(context.Background(), f.reg.Host+"/anvil/disk-os:1", map[computev1alpha1.Architecture]string{
		computev1alpha1.ArchitectureAMD64: img,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return pinned
}

// scratchDisk gives the agent a blank disk of size bytes, as the controller's emptyDisk
// volume: a loop device, found through a /sys/block and /dev of the test's own.
func scratchDisk(t *testing.T, size int64) string {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "scratch")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(file, size); err != nil {
		t.Fatal(err)
	}
	loop := mustRun(t, "losetup", "--find", "--show", file)
	t.Cleanup(func() { _ = exec.Command("losetup", "-d", loop).Run() })
	sys, dev := filepath.Join(dir, "sys"), filepath.Join(dir, "dev")
	for name, sectors := range map[string]int64{"vda": 2048, "vdb": size / 512} {
		if err := os.MkdirAll(filepath.Join(sys, name), 0o755); err != nil {
			t.Fatal(err)
		}
		ro := "0\n"
		if name == "vda" { // the seed disk
			ro = "1\n"
		}
		if err := os.WriteFile(filepath.Join(sys, name, "size"), []byte(strconv.FormatInt(sectors, 10)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sys, name, "ro"), []byte(ro), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(dev, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(loop, filepath.Join(dev, "vdb")); err != nil {
		t.Fatal(err)
	}
	oldSys, oldDev := sysBlock, devDir
	sysBlock, devDir = sys, dev
	t.Cleanup(func() { sysBlock, devDir = oldSys, oldDev })
	return loop
}

// The agent on a disk root: the base's qcow2 written onto the scratch disk, the steps run
// in its mounted ext4 root (ENV, WORKDIR, COPY, RUN with the package proxy's variables),
// the result a compressed qcow2 that holds them, with the base's kernel; a step that
// changes /boot makes the image boot the root's own kernel and initramfs.
func TestRunBuildsOnADiskRoot(t *testing.T) {
	f := newFixture(t)
	base := f.pushDiskBase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	motd := []byte("built on a disk\n")
	for _, tc := range []struct {
		name, steps string
		newKernel   bool
	}{
		{"steps", "ENV GREETING=hello\nWORKDIR /srv/app\nCOPY motd /etc/motd\nRUN echo \"$GREETING $http_proxy $(pwd)\" > out\nRUN test -c /dev/pts/ptmx\n", false},
		{"new kernel", "RUN echo another-kernel > /boot/vmlinuz-2 && echo another-initramfs > /boot/initrd.img-2 && ln -sf boot/vmlinuz-2 /vmlinuz && ln -sf boot/initrd.img-2 /initrd.img\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scratchDisk(t, diskRootSize)
			recipe := imagebuild.Recipe{
				Containerfiles: []imagesv1alpha1.Containerfile{{Content: tc.steps}},
				Context:        map[string]string{"motd": imagebuild.ContentDigest(motd)},
			}
			job := f.job(t, recipe, map[string][]byte{"motd": motd}, "1")
			job.Base, job.RootDiskBytes, job.PackageProxy = base, diskRootSize, "10.0.2.101:3128"
			_, files := runAndPull(ctx, t, job)
			if files.DiskFormat != osimage.DiskFormatQCOW2 || files.Kernel == "" || files.Initramfs == "" {
				t.Fatalf("pulled %+v, want a kernel, an initramfs and a qcow2 disk", files)
			}
			raw := filepath.Join(t.TempDir(), "out.raw")
			mustRun(t, "qemu-img", "check", files.Disk)
			mustRun(t, "qemu-img", "convert", "-O", "raw", files.Disk, raw)
			debugfs := func(request string) string {
				out, err := exec.Command("debugfs", "-R", request, raw).Output() // its banner goes to stderr
				if err != nil {
					t.Fatalf("debugfs -R %q: %v", request, err)
				}
				return strings.TrimSpace(string(out))
			}
			cat := func(p string) string { return debugfs("cat " + p) }
			kernel, _ := os.ReadFile(files.Kernel)
			baseKernel, _ := os.ReadFile(filepath.Join(testos.Dir(t), "amd64", "kernel"))
			if tc.newKernel {
				if string(kernel) != "another-kernel\n" {
					t.Errorf("the image's kernel is not the root's new one (%d bytes)", len(kernel))
				}
				return
			}
			if !bytes.Equal(kernel, baseKernel) {
				t.Error("the image's kernel is not the base's")
			}
			if got := cat("/srv/app/out"); got != "hello http://10.0.2.101:3128 /srv/app" {
				t.Errorf("/srv/app/out = %q", got)
			}
			if got := cat("/etc/motd"); got+"\n" != string(motd) {
				t.Errorf("/etc/motd = %q", got)
			}
			// -p: one line per entry, /ino/mode/uid/gid/name/size/.
			if got := debugfs("ls -p /proc"); strings.Count(got, "\n") > 1 {
				t.Errorf("the root's /proc holds more than . and ..: RUN's mounts were written:\n%s", got)
			}
		})
	}
}
