package images

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
func build(t *testing.T, out string, flags ...string) error {
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
	out2, err := run(root, buildTool, append([]string{"build", "-out", out, "-bin", bin}, flags...)...)
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
// byte for byte (hence every manifest, config and layer). Under make test the first build is
// make's own bin/images (a prerequisite of make test, so up to date) and the second builds
// anvil-qemu alone: it takes every step of the pipeline (anvil for both architectures, the
// CA bundle, Debian packages unpacked and fixed up, layers, index and layout) at a third of
// the cost of all three images, which was the package's longest step by far (16 minutes
// beside the heavy lane in CI). Elsewhere (bin/images missing or older than its sources, or
// another bin/) the package builds everything twice.
func TestBuildIsReproducible(t *testing.T) {
	if made, ok := makesBuild(t); ok {
		again := t.TempDir()
		if err := build(t, again, "-image", "anvil-qemu"); err != nil {
			t.Fatal(err)
		}
		compareBuilds(t, made, again, "anvil-qemu", []string{"DIGESTS", "SIZES"}, []string{"anvil-qemu.VERSIONS"})
		return
	}
	first := built(t)
	second := t.TempDir()
	if err := build(t, second); err != nil {
		t.Fatal(err)
	}
	compareBuilds(t, first, second, "", nil, []string{"DIGESTS", "SIZES", "anvil-qemu.VERSIONS", "anvil-metal.VERSIONS"})
}

// compareBuilds fails for every file of whole that differs between builds a and b, and for
// every file of lines whose lines about image (those starting with its name) differ.
func compareBuilds(t *testing.T, a, b, image string, lines, whole []string) {
	t.Helper()
	read := func(dir, f string) string {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	about := func(text string) string {
		var kept []string
		for _, l := range strings.Split(text, "\n") {
			if strings.HasPrefix(l, image+" ") {
				kept = append(kept, l)
			}
		}
		return strings.Join(kept, "\n")
	}
	for _, f := range lines {
		x, y := about(read(a, f)), about(read(b, f))
		if x == "" {
			t.Errorf("%s of %s says nothing of %s", f, a, image)
		}
		if x != y {
			t.Errorf("%s's lines of %s differ between two builds (%s and %s):\n%s\n---\n%s", f, image, a, b, x, y)
		}
	}
	for _, f := range whole {
		if x, y := read(a, f), read(b, f); x != y {
			t.Errorf("%s differs between two builds (%s and %s):\n%s\n---\n%s", f, a, b, x, y)
		}
	}
}

// layouts is the folder of image layouts the package's tests read: make's bin/images when it
// is up to date, else the package's own build.
func layouts(t *testing.T) string {
	t.Helper()
	if dir, ok := makesBuild(t); ok {
		return dir
	}
	return built(t)
}

var (
	makesOnce sync.Once
	makesDir  string
	makesOK   bool
)

// makesBuild is the repository's bin/images when make says it is up to date with its sources
// (make -q on the target make test builds) and the tests use the repository's bin/; asked
// once a package.
func makesBuild(t *testing.T) (string, bool) {
	t.Helper()
	makesOnce.Do(func() { makesDir, makesOK = findMakesBuild(t) })
	return makesDir, makesOK
}

func findMakesBuild(t *testing.T) (string, bool) {
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
