package v1alpha1_test

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/test/harness"
)

var env *harness.Env

func TestMain(m *testing.M) { harness.Main(m, &env) }

var (
	sumK = "sha256:" + strings.Repeat("a", 64)
	sumR = "sha256:" + strings.Repeat("b", 64)
)

func validHost(name string) *metalv1alpha1.Host {
	return &metalv1alpha1.Host{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: metalv1alpha1.HostSpec{
			BMC:            metalv1alpha1.BMC{Address: "fake://" + name},
			BootMACAddress: "52:54:00:00:00:01",
			Architecture:   computev1alpha1.ArchitectureAMD64,
		},
	}
}

func ramdiskImage() *metalv1alpha1.HostImage {
	return &metalv1alpha1.HostImage{
		Kernel:          &metalv1alpha1.BootFile{URL: "http://127.0.0.1/k", Checksum: sumK},
		Initramfs:       &metalv1alpha1.BootFile{URL: "http://127.0.0.1/r", Checksum: sumR},
		KernelArguments: "console=ttyS0",
	}
}

// A disk image and a kernel with its initramfs are both accepted; boot mode defaults to
// UEFI.
func TestHostImageKinds(t *testing.T) {
	ctx := context.Background()
	for name, img := range map[string]*metalv1alpha1.HostImage{
		"disk":    {URL: "http://127.0.0.1/disk.raw", Checksum: sumK, Format: metalv1alpha1.ImageFormatQCOW2},
		"ramdisk": ramdiskImage(),
	} {
		h := validHost("image-" + name)
		h.Spec.Image = img
		if err := env.Client.Create(ctx, h); err != nil {
			t.Fatalf("%s: creating a valid Host: %v", name, err)
		}
		got := &metalv1alpha1.Host{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(h), got); err != nil {
			t.Fatal(err)
		}
		if got.Spec.BootMode != metalv1alpha1.BootModeUEFI {
			t.Errorf("%s: boot mode %q, want the default UEFI", name, got.Spec.BootMode)
		}
		if !got.Spec.Image.Same(img) {
			t.Errorf("%s: image read back %+v, want %+v", name, got.Spec.Image, img)
		}
	}
}

func TestHostRejectsInvalidImage(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mutate  func(*metalv1alpha1.HostImage)
		message string
	}{
		{"disk and kernel", func(i *metalv1alpha1.HostImage) { i.URL, i.Checksum = "http://127.0.0.1/d", sumK },
			"give url and checksum (a disk image) or kernel and initramfs (booted from RAM), not both"},
		{"neither", func(i *metalv1alpha1.HostImage) { *i = metalv1alpha1.HostImage{} },
			"give url and checksum (a disk image) or kernel and initramfs"},
		{"kernel alone", func(i *metalv1alpha1.HostImage) { i.Initramfs = nil }, "kernel and initramfs go together"},
		{"disk without checksum", func(i *metalv1alpha1.HostImage) { *i = metalv1alpha1.HostImage{URL: "http://127.0.0.1/d"} },
			"image.checksum is required with image.url"},
		{"checksum beside a kernel", func(i *metalv1alpha1.HostImage) { i.Checksum = sumK },
			"image.checksum and image.format describe image.url"},
		{"arguments without a kernel", func(i *metalv1alpha1.HostImage) {
			*i = metalv1alpha1.HostImage{URL: "http://127.0.0.1/d", Checksum: sumK, KernelArguments: "quiet"}
		}, "image.kernelArguments is the command line of image.kernel"},
		{"kernel not over HTTP", func(i *metalv1alpha1.HostImage) { i.Kernel.URL = "file:///boot/vmlinuz" },
			"the URL of a kernel or initramfs must be http:// or https://"},
		{"initramfs checksum malformed", func(i *metalv1alpha1.HostImage) { i.Initramfs.Checksum = "md5:abc" },
			"spec.image.initramfs.checksum"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := validHost("invalid-image")
			h.Spec.Image = ramdiskImage()
			tc.mutate(h.Spec.Image)
			err := env.Client.Create(context.Background(), h)
			if !apierrors.IsInvalid(err) {
				t.Fatalf("create returned %v, want an Invalid error", err)
			}
			if !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("error %q does not say %q", err.Error(), tc.message)
			}
		})
	}
	h := validHost("invalid-boot-mode")
	h.Spec.BootMode = "BIOS"
	if err := env.Client.Create(context.Background(), h); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), `spec.bootMode: Unsupported value: "BIOS"`) {
		t.Fatalf("boot mode BIOS: %v, want Unsupported value", err)
	}
}
