package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/remote"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/imageref"
	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/internal/registry"
	"github.com/anvil-dev/anvil/internal/registrynet"
)

// runAnvil runs the anvil command line in-process and returns its stdout.
func runAnvil(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newRootCommand()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

// artifactDir writes a folder as `anvil image push --from` expects it.
func artifactDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for n, content := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestImagePushPrintsTheIndexDigestAndPulls(t *testing.T) {
	reg, err := registry.Start(context.Background(), 0, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Spare connections of the push would hold the registry's Stop for 5 s.
		remote.DefaultTransport.(*http.Transport).CloseIdleConnections()
		_ = reg.Stop()
	})
	amd := artifactDir(t, map[string]string{"kernel": "amd64 kernel", "initramfs": "amd64 initramfs", "cmdline": "console=ttyS0\n"})
	arm := artifactDir(t, map[string]string{"kernel": "arm64 kernel", "disk.raw": "arm64 disk"})

	out, err := runAnvil(t, "image", "push", reg.Host+"/anvil/testos:1", "--from", "amd64="+amd, "--from", "arm64="+arm)
	if err != nil {
		t.Fatal(err)
	}
	pinned := strings.TrimSpace(out)
	repo, digest, ok := strings.Cut(pinned, "@")
	if !ok || repo != reg.Host+"/anvil/testos" || !strings.HasPrefix(digest, "sha256:") {
		t.Fatalf("printed %q, want %s/anvil/testos@sha256:...", out, reg.Host)
	}
	again, err := runAnvil(t, "image", "push", reg.Host+"/anvil/testos:2", "--from", "arm64="+arm, "--from", "amd64="+amd)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(strings.TrimSpace(again), "@"+digest) {
		t.Fatalf("reordered --from gave %q, first push %q", again, out)
	}
	// With an annotation: the index says it (what requiredImageAnnotations read).
	node := reg.Host + "/anvil/node:v1.36.3"
	if _, err := runAnvil(t, "image", "push", node, "--from", "amd64="+amd, "--annotation", "dev.anvil.kubernetes.version=v1.36.3"); err != nil {
		t.Fatal(err)
	}
	says, err := (&imageref.Registry{Transport: registrynet.Policy{Allow: registrynet.Loopback}.Transport()}).Annotations(context.Background(), node)
	if err != nil || says["dev.anvil.kubernetes.version"] != "v1.36.3" {
		t.Errorf("the pushed index says %v (%v), want dev.anvil.kubernetes.version=v1.36.3", says, err)
	}

	cache, err := osimage.NewCache(t.TempDir(), osimage.CacheOptions{Network: registrynet.Policy{Allow: registrynet.Loopback}})
	if err != nil {
		t.Fatal(err)
	}
	f, err := cache.Pull(context.Background(), pinned, "", computev1alpha1.ArchitectureAMD64)
	if err != nil {
		t.Fatal(err)
	}
	if f.KernelCommandLine != "console=ttyS0" {
		t.Errorf("kernel command line %q", f.KernelCommandLine)
	}
	if b, _ := os.ReadFile(f.Initramfs); string(b) != "amd64 initramfs" {
		t.Errorf("initramfs %q", b)
	}
	f, err = cache.Pull(context.Background(), pinned, "", computev1alpha1.ArchitectureARM64)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(f.Disk); string(b) != "arm64 disk" || f.DiskFormat != osimage.DiskFormatRaw {
		t.Errorf("disk %q format %q", b, f.DiskFormat)
	}
}

func TestImagePushRefuses(t *testing.T) {
	good := artifactDir(t, map[string]string{"kernel": "k"})
	for _, tc := range []struct {
		name       string
		from       []string
		want       string
		annotation string
	}{
		{"unknown architecture", []string{"x86_64=" + good}, `unknown architecture "x86_64"`, ""},
		{"repeated architecture", []string{"amd64=" + good, "amd64=" + good}, "already built from", ""},
		{"not ARCH=DIR", []string{good}, "want ARCH=DIR", ""},
		{"missing folder", []string{"amd64=" + filepath.Join(good, "nope")}, "no such file", ""},
		{"nothing to boot", []string{"amd64=" + artifactDir(t, map[string]string{"initramfs": "i"})}, "has no kernel", ""},
		{"two disks", []string{"amd64=" + artifactDir(t, map[string]string{"disk.raw": "r", "disk.qcow2": "QFI\xfb"})}, "both disk.raw and disk.qcow2", ""},
		{"misnamed file", []string{"amd64=" + artifactDir(t, map[string]string{"kernel": "k", "initrd": "i"})}, `holds "initrd"`, ""},
		{"two-line cmdline", []string{"amd64=" + artifactDir(t, map[string]string{"kernel": "k", "cmdline": "a\nb\n"})}, "one line", ""},
		{"annotation without =", []string{"amd64=" + good}, "want KEY=VALUE", "dev.anvil.kubernetes.version"},
		{"annotation without key", []string{"amd64=" + good}, "want KEY=VALUE", "=v1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"image", "push", "127.0.0.1:1/anvil/never:1"}
			for _, f := range tc.from {
				args = append(args, "--from", f)
			}
			if tc.annotation != "" {
				args = append(args, "--annotation", tc.annotation)
			}
			_, err := runAnvil(t, args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	if _, err := runAnvil(t, "image", "push", "127.0.0.1:1/anvil/never:1"); err == nil || !strings.Contains(err.Error(), "from") {
		t.Fatalf("no --from: %v", err)
	}
}
