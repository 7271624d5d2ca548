package site

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/ironic"
)

func TestWipeCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		w    Wipe
		want string // "" when valid
	}{
		{"no method: a site never wipes nothing by default", Wipe{}, "needs a wipe method"},
		{"eraser without its folder", Wipe{Method: WipeEraser}, "make eraser"},
		{"eraser", Wipe{Method: WipeEraser, EraserDir: "/e"}, ""},
		{"ironic", Wipe{Method: WipeIronic}, ""},
		{"none", Wipe{Method: WipeNone}, ""},
		{"a folder for another method", Wipe{Method: WipeNone, EraserDir: "/e"}, "not eraser"},
		{"unknown", Wipe{Method: "shred"}, `unknown wipe method "shred"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.w.check()
			if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("check() = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestWipeCleaning(t *testing.T) {
	for w, want := range map[Wipe]ironic.Cleaning{
		{Method: WipeEraser, EraserDir: "/e", Full: true}: ironic.CleanNone,
		{Method: WipeNone}:               ironic.CleanNone,
		{Method: WipeIronic}:             ironic.CleanMetadata,
		{Method: WipeIronic, Full: true}: ironic.CleanFull,
	} {
		if got := w.cleaning(); got != want {
			t.Errorf("%+v: cleaning %v, want %v", w, got, want)
		}
	}
}

// The eraser's files are served as they were at start, with their checksums, and the
// kernel arguments ask for a full erase when configured.
func TestServeEraser(t *testing.T) {
	src := t.TempDir()
	write := func(name, content string) {
		p := filepath.Join(src, "amd64", name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("kernel", "K")
	write("initramfs", "I")
	write("cmdline", "console=ttyS0 quiet\n")
	s, err := serveEraser(Wipe{Method: WipeEraser, EraserDir: src, Full: true}, filepath.Join(t.TempDir(), "eraser"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	write("kernel", "rebuilt") // a rebuild after start changes nothing served
	img, ok := s.images[computev1alpha1.ArchitectureAMD64]
	if !ok || len(s.images) != 1 {
		t.Fatalf("images %+v: want amd64 only", s.images)
	}
	if img.KernelArguments != "console=ttyS0 quiet anvil.erase=full" {
		t.Errorf("kernel arguments %q", img.KernelArguments)
	}
	resp, err := http.Get(img.Kernel.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	sum := sha256.Sum256(body)
	if string(body) != "K" || img.Kernel.Checksum != "sha256:"+hex.EncodeToString(sum[:]) {
		t.Errorf("served %q with checksum %s", body, img.Kernel.Checksum)
	}

	if _, err := serveEraser(Wipe{Method: WipeEraser, EraserDir: t.TempDir()}, filepath.Join(t.TempDir(), "e")); err == nil ||
		!strings.Contains(err.Error(), "make eraser") {
		t.Errorf("an empty eraser folder: %v", err)
	}
	os.Remove(filepath.Join(src, "amd64", "initramfs"))
	if _, err := serveEraser(Wipe{Method: WipeEraser, EraserDir: src}, filepath.Join(t.TempDir(), "e")); err == nil ||
		!strings.Contains(err.Error(), "initramfs") {
		t.Errorf("an eraser without its initramfs: %v", err)
	}
}
