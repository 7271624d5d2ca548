package images

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/anvil-dev/anvil/test/harness"
)

// names are the images hack/images builds.
var names = []string{"anvil", "anvil-qemu", "anvil-metal"}

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
	buildTool string
)

// built is the output folder of one build, shared by the package's tests.
func built(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "anvil-images-")
		if buildErr == nil {
			buildErr = build(t, buildDir)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	if buildTool != "" {
		os.RemoveAll(filepath.Dir(buildTool))
	}
	os.Exit(code)
}

// build runs hack/images build into out, with the repository's bin/ for the eraser and
// the EFI system partition.
func build(t *testing.T, out string) error {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		return err
	}
	bin := os.Getenv("KUBEBUILDER_ASSETS")
	if bin == "" {
		bin = filepath.Join(root, "bin")
	}
	for _, p := range []string{"eraser/VERSIONS", "esp.img"} {
		if _, err := os.Stat(filepath.Join(bin, p)); err != nil {
			t.Fatalf("%v: run make eraser esp", err)
		}
	}
	for _, tool := range []string{"apt-get", "dpkg-deb", "chroot", "unshare", "tar"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is missing: these tests need a Debian machine (make deps)", tool)
		}
	}
	if os.Geteuid() != 0 {
		t.Fatal("these tests unpack images and chroot into them: run them as root")
	}
	if buildTool == "" {
		dir, err := os.MkdirTemp("", "anvil-images-tool-")
		if err != nil {
			return err
		}
		buildTool = filepath.Join(dir, "images")
		if out, err := run(root, "go", "build", "-o", buildTool, "./hack/images"); err != nil {
			t.Fatalf("building hack/images: %v\n%s", err, out)
		}
	}
	start := time.Now()
	out2, err := run(root, buildTool, "build", "-out", out, "-bin", bin)
	if err != nil {
		t.Fatalf("hack/images build: %v\n%s", err, out2)
	}
	t.Logf("built the images in %s:\n%s", time.Since(start).Round(time.Second), out2)
	return nil
}

func run(dir, name string, args ...string) ([]byte, error) {
	return runEnv(dir, nil, name, args...)
}

// runEnv runs name in dir with env added to this process's environment.
func runEnv(dir string, env []string, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	return cmd.CombinedOutput()
}

// Two builds from the same checkout and the same Debian packages give the same indexes,
// byte for byte (hence every manifest, config and layer). Under make test the other build is
// make's own bin/images (a prerequisite of make test, so up to date): a build saved, the
// package's longest step. Elsewhere (bin/images missing or older than its sources, or another
// bin folder) the test builds a second time.
func TestBuildIsReproducible(t *testing.T) {
	first := built(t)
	second, ok := makesBuild(t)
	if !ok {
		second = t.TempDir()
		if err := build(t, second); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"DIGESTS", "SIZES", "anvil-qemu.VERSIONS", "anvil-metal.VERSIONS"} {
		a, err := os.ReadFile(filepath.Join(first, f))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(second, f))
		if err != nil {
			t.Fatal(err)
		}
		if string(a) != string(b) {
			t.Errorf("%s differs between two builds (%s and %s):\n%s\n---\n%s", f, first, second, a, b)
		}
	}
}

// makesBuild is the repository's bin/images when make says it is up to date with its sources
// (make -q on the target make test builds) and the tests use the repository's bin/.
func makesBuild(t *testing.T) (string, bool) {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "bin")
	if assets := os.Getenv("KUBEBUILDER_ASSETS"); assets != "" && assets != bin {
		t.Logf("building twice: the tests use %s, not this checkout's bin/", assets)
		return "", false
	}
	if out, err := run(root, "make", "-q", filepath.Join(bin, "images", "SIZES")); err != nil {
		t.Logf("building twice: make -q says bin/images is not up to date (%v) %s", err, out)
		return "", false
	}
	t.Logf("comparing with make's build in %s", filepath.Join(bin, "images"))
	return filepath.Join(bin, "images"), true
}
