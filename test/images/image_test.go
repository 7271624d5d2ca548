package images

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/anvil-dev/anvil/internal/containerimage"
	"github.com/anvil-dev/anvil/test/harness"
)

// images are each built image's index and its linux images by architecture.
func images(t *testing.T, name string) (v1.ImageIndex, map[string]v1.Image) {
	t.Helper()
	idx, err := containerimage.ReadLayout(filepath.Join(layouts(t), name))
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	imgs := map[string]v1.Image{}
	for _, d := range m.Manifests {
		if d.Platform == nil || d.Platform.OS != "linux" || d.Platform.Variant != "" {
			t.Fatalf("%s: an entry's platform is %v, want linux/amd64 or linux/arm64", name, d.Platform)
		}
		if imgs[d.Platform.Architecture], err = idx.Image(d.Digest); err != nil {
			t.Fatal(err)
		}
	}
	if len(m.Manifests) != 2 || imgs["amd64"] == nil || imgs["arm64"] == nil {
		t.Fatalf("%s: index entries %v, want exactly linux/amd64 and linux/arm64", name, m.Manifests)
	}
	return idx, imgs
}

// readFile is the content of the file at name (no leading slash) in img's flattened
// filesystem, following hard links but not symlinks.
func readFile(t *testing.T, img v1.Image, name string) []byte {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	content := map[string][]byte{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			t.Fatalf("%s is not in the image", name)
		}
		if err != nil {
			t.Fatal(err)
		}
		n := strings.TrimPrefix(h.Name, "/")
		if h.Typeflag == tar.TypeLink && n == name {
			if b, ok := content[strings.TrimPrefix(h.Linkname, "/")]; ok {
				return b
			}
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if n == name {
			return b
		}
		content[n] = b
	}
}

var machines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// checkELF fails unless data is an executable for arch, and when static is set, one
// without a program interpreter (a static binary).
func checkELF(t *testing.T, what, arch string, data []byte, static bool) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s (%s): %v", what, arch, err)
	}
	if f.Machine != machines[arch] {
		t.Errorf("%s (%s) is for %s, want %s", what, arch, f.Machine, machines[arch])
	}
	if !static {
		return
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s (%s) has a program interpreter: not a static binary", what, arch)
		}
	}
}

// Each index is linux/amd64 + linux/arm64 with OCI labels; each image runs the static anvil
// of its architecture, as the user its role needs, with the users QEMU and Pods need.
func TestIndexesLabelsAndBinaries(t *testing.T) {
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out, err := run(root, "git", "rev-parse", "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	revision := strings.TrimSpace(string(out))
	users := map[string]string{"anvil": "65532:65532", "anvil-qemu": "0:0", "anvil-metal": "65532:65532"}
	var anvilLayers map[string]v1.Hash
	for _, name := range names {
		idx, imgs := images(t, name)
		m, err := idx.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		checkLabels(t, name+" index", m.Annotations, name, revision)
		layers := map[string]v1.Hash{}
		for arch, img := range imgs {
			cfg, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			checkLabels(t, name+" "+arch, cfg.Config.Labels, name, revision)
			if cfg.Architecture != arch || cfg.OS != "linux" || strings.Join(cfg.Config.Entrypoint, " ") != "/anvil" || cfg.Config.User != users[name] {
				t.Errorf("%s %s: config %s/%s entrypoint %v user %q", name, arch, cfg.OS, cfg.Architecture, cfg.Config.Entrypoint, cfg.Config.User)
			}
			checkELF(t, name+" /anvil", arch, readFile(t, img, "anvil"), true)
			if passwd := string(readFile(t, img, "etc/passwd")); !strings.Contains(passwd, "\nanvil-qemu:x:65533:65533:") || !strings.Contains(passwd, "\nnonroot:x:65532:65532:") {
				t.Errorf("%s %s: /etc/passwd lacks nonroot or anvil-qemu:\n%s", name, arch, passwd)
			}
			ls, err := img.Layers()
			if err != nil {
				t.Fatal(err)
			}
			if layers[arch], err = ls[0].Digest(); err != nil {
				t.Fatal(err)
			}
		}
		// Every image starts with the same anvil layer: a node pulls it once.
		if anvilLayers == nil {
			anvilLayers = layers
		} else if layers["amd64"] != anvilLayers["amd64"] || layers["arm64"] != anvilLayers["arm64"] {
			t.Errorf("%s's first layers %v are not anvil's %v", name, layers, anvilLayers)
		}
	}
}

func checkLabels(t *testing.T, what string, labels map[string]string, title, revision string) {
	t.Helper()
	want := map[string]string{containerimage.LabelTitle: title, containerimage.LabelRevision: revision,
		containerimage.LabelSource: "https://github.com/anvil-dev/anvil"}
	for k, v := range want {
		if labels[k] != v {
			t.Errorf("%s: %s = %q, want %q", what, k, labels[k], v)
		}
	}
	if labels[containerimage.LabelVersion] == "" || labels[containerimage.LabelCreated] == "" {
		t.Errorf("%s: no version or created label: %v", what, labels)
	}
}

// unpack writes img's filesystem into a new folder, as a container runtime would.
func unpack(t *testing.T, img v1.Image) string {
	t.Helper()
	dir := t.TempDir()
	rc := mutate.Extract(img)
	defer rc.Close()
	cmd := exec.Command("tar", "-xpf", "-", "-C", dir)
	cmd.Stdin = rc
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("unpacking: %v\n%s", err, out)
	}
	for _, d := range []string{"proc", "dev"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// inRoot runs argv chrooted into root with its own /proc and the host's /dev (what a
// container gets), in a mount namespace of its own that goes away with it.
func inRoot(t *testing.T, root, stdin string, argv ...string) string {
	t.Helper()
	script := `mount --rbind /dev "$1/dev" && root=$1 && shift && exec chroot "$root" "$@"`
	args := append([]string{"--mount", "--pid", "--fork", "--mount-proc=" + filepath.Join(root, "proc"), "sh", "-c", script, "sh", root}, argv...)
	cmd := exec.Command("unshare", args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s in the image: %v\n%s", strings.Join(argv, " "), err, out)
	}
	return string(out)
}

func mustContain(t *testing.T, what, out, want string) {
	t.Helper()
	if !strings.Contains(out, want) {
		t.Errorf("%s: output lacks %q:\n%s", what, want, out)
	}
}
