package testos

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anvil-dev/anvil/test/harness"
)

// The archive logic of hack/testos/archive.sh against a fake apt-cache and apt-get that
// answer from a fixture in the real output formats (madison right-aligns its first two
// columns to ten characters, policy names the Candidate, depends names a kernel ABI
// package). No network: apt-get update only counts its calls, and apt-get download builds a
// real .deb with dpkg-deb.

// fakeApt is the fake apt-cache and apt-get. The fixture ($FAKE_ARCHIVE) holds one
// "ARCH PACKAGE VERSION [all]" a line, newest first ("all": an architecture-independent
// package, whose .deb is named _all.deb); "ARCH PACKAGE -> DEPENDENCY" lines give
// depends' answer. Calls to apt-get update are appended to $FAKE_UPDATES.
const fakeApt = `#!/usr/bin/env bash
set -euo pipefail
arch="" args=()
for a in "$@"; do
	case $a in
	-oAPT::Architecture=*) arch=${a#-oAPT::Architecture=} ;;
	-o*|-q*) ;;
	*) args+=("$a") ;;
	esac
done
versions() { awk -v a="$arch" -v p="$1" '$1 == a && $2 == p && $3 != "->" { print $3 }' "$FAKE_ARCHIVE"; }
case "$(basename "$0") ${args[0]}" in
"apt-get update") echo "$arch" >>"$FAKE_UPDATES" ;;
"apt-get download")
	pkg=${args[1]%%=*} ver=${args[1]#*=}
	versions "$pkg" | grep -qxF "$ver" || { echo "E: Version '$ver' for '$pkg' was not found" >&2; exit 100; }
	awk -v a="$arch" -v p="$pkg" -v v="$ver" '$1 == a && $2 == p && $3 == v && $4 == "all" { found = 1 } END { exit !found }' "$FAKE_ARCHIVE" && arch=all
	d=$(mktemp -d)
	mkdir "$d/DEBIAN"
	printf 'Package: %s\nVersion: %s\nArchitecture: %s\nMaintainer: test\nDescription: fake\n' "$pkg" "$ver" "$arch" >"$d/DEBIAN/control"
	dpkg-deb --build "$d" "${pkg}_${ver/:/%3a}_${arch}.deb" >/dev/null
	rm -rf "$d" ;;
"apt-cache madison")
	for v in $(versions "${args[1]}"); do
		printf '%10s | %10s | http://deb.debian.org/debian bookworm/main %s Packages\n' "${args[1]}" "$v" "$arch"
	done ;;
"apt-cache policy")
	v=$(versions "${args[1]}" | head -n1)
	[ -n "$v" ] || { echo "N: Unable to locate package ${args[1]}" >&2; exit 0; }
	printf '%s:\n  Installed: (none)\n  Candidate: %s\n  Version table:\n     %s 500\n' "${args[1]}" "$v" "$v" ;;
"apt-cache depends")
	printf '%s\n' "${args[1]}"
	awk -v a="$arch" -v p="${args[1]}" '$1 == a && $2 == p && $3 == "->" { print "  Depends: " $4 }' "$FAKE_ARCHIVE" ;;
*) echo "fake apt: unexpected call: $0 $*" >&2; exit 2 ;;
esac
`

const archiveFixture = `amd64 busybox-static 1:1.35.0-4+deb12u1+b1
amd64 busybox-static 1:1.35.0-4+deb12u1
amd64 zsh 5.9-4+b2
arm64 python3-jsonschema 4.10.3-1 all
amd64 linux-image-6.1.0-47-cloud-amd64 6.1.170-3
amd64 linux-image-6.1.0-56-cloud-amd64 6.1.192-2
amd64 linux-image-cloud-amd64 6.1.192-2
amd64 linux-image-cloud-amd64 -> linux-image-6.1.0-56-cloud-amd64
arm64 linux-image-6.1.0-56-cloud-arm64 6.1.192-2
arm64 linux-image-cloud-arm64 6.1.192-2
arm64 linux-image-cloud-arm64 -> linux-image-6.1.0-56-cloud-arm64
`

// archiveEnv is one package cache with the fake apt in front of PATH.
type archiveEnv struct {
	script, bin, cache, updates string
}

func newArchiveEnv(t *testing.T) *archiveEnv {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"bash", "awk", "dpkg-deb"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed to test the test OS build: %v", tool, err)
		}
	}
	dir := t.TempDir()
	e := &archiveEnv{
		script:  filepath.Join(root, "hack", "testos", "archive.sh"),
		bin:     filepath.Join(dir, "bin"),
		cache:   filepath.Join(dir, "cache"),
		updates: filepath.Join(dir, "updates"),
	}
	if err := os.MkdirAll(e.bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"apt-get", "apt-cache"} {
		if err := os.WriteFile(filepath.Join(e.bin, name), []byte(fakeApt), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "archive"), []byte(archiveFixture), 0o644); err != nil {
		t.Fatal(err)
	}
	return e
}

// fetch runs one build's fetch of a pin, as build.sh does, and returns the chosen .deb's
// package and version, what it printed on stderr, and its error. A fetch that does not end
// within the limit fails the test: the bug this guards against was endless recursion.
func (e *archiveEnv) fetch(t *testing.T, arch, pkg, ver string) (chosen, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	work := t.TempDir() // a new build each call: its "lists updated" marker starts empty
	script := `set -euo pipefail; shopt -s inherit_errexit; source "$1"
deb=$(fetch "$2" "$3" "$4")
echo "$(dpkg-deb -f "$deb" Package) $(dpkg-deb -f "$deb" Version)"`
	cmd := exec.CommandContext(ctx, "bash", "-c", script, "fetch", e.script, arch, pkg, ver)
	cmd.Env = append(os.Environ(),
		"PATH="+e.bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"cache="+e.cache, "work="+work,
		"FAKE_ARCHIVE="+filepath.Join(filepath.Dir(e.bin), "archive"), "FAKE_UPDATES="+e.updates)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("fetch %s %s (%s) did not end within 30s; stderr:\n%s", pkg, ver, arch, tail(errOut.String()))
	}
	return strings.TrimSpace(out.String()), errOut.String(), err
}

// updates counts the apt-get update calls so far: the build's only network use.
func (e *archiveEnv) updateCalls() int {
	b, _ := os.ReadFile(e.updates)
	return strings.Count(string(b), "\n")
}

func tail(s string) string {
	if len(s) > 2000 {
		return "..." + s[len(s)-2000:]
	}
	return s
}

func TestFetchChoosesThePinOrItsReplacementOnce(t *testing.T) {
	for _, tc := range []struct {
		name, arch, pkg, ver string
		want                 string // "PACKAGE VERSION" of the .deb used
		warns                bool
	}{
		{"short name, pinned version present", "amd64", "zsh", "5.9-4+b2", "zsh 5.9-4+b2", false},
		{"name over ten characters, version padded", "amd64", "linux-image-6.1.0-47-cloud-amd64", "6.1.170-3",
			"linux-image-6.1.0-47-cloud-amd64 6.1.170-3", false},
		{"architecture-independent package (_all.deb)", "arm64", "python3-jsonschema", "4.10.3-1",
			"python3-jsonschema 4.10.3-1", false},
		{"older version of a present package", "amd64", "busybox-static", "1:1.35.0-4+deb12u1",
			"busybox-static 1:1.35.0-4+deb12u1", false},
		{"dropped version: the package's current one", "amd64", "busybox-static", "1:1.35.0-4",
			"busybox-static 1:1.35.0-4+deb12u1+b1", true},
		{"kernel ABI bump: the ABI package the metapackage depends on", "arm64", "linux-image-6.1.0-47-cloud-arm64", "6.1.170-3",
			"linux-image-6.1.0-56-cloud-arm64 6.1.192-2", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newArchiveEnv(t)
			chosen, stderr, err := e.fetch(t, tc.arch, tc.pkg, tc.ver)
			if err != nil {
				t.Fatalf("fetch failed: %v\n%s", err, stderr)
			}
			if chosen != tc.want {
				t.Errorf("fetch used %q, want %q", chosen, tc.want)
			}
			warnings := strings.Count(stderr, "WARNING")
			if tc.warns && (warnings != 1 || !strings.Contains(stderr, "put it in hack/testos/packages")) {
				t.Errorf("want one warning naming the pin to update, stderr:\n%s", stderr)
			}
			if !tc.warns && warnings != 0 {
				t.Errorf("want no warning, stderr:\n%s", stderr)
			}
			if got := e.updateCalls(); got != 1 {
				t.Errorf("apt-get update ran %d times, want once", got)
			}

			// The next build finds what it used in the cache and asks the archive nothing.
			again, stderr, err := e.fetch(t, tc.arch, tc.pkg, tc.ver)
			if err != nil || again != chosen {
				t.Fatalf("second fetch = %q, %v, want %q\n%s", again, err, chosen, stderr)
			}
			if got := e.updateCalls(); got != 1 {
				t.Errorf("the second build ran apt-get update (%d calls in all): the cache should serve it", got)
			}
			if tc.warns && strings.Count(stderr, "WARNING") != 1 {
				t.Errorf("the second build should still say once that the pin is stale, stderr:\n%s", stderr)
			}
		})
	}
}

func TestFetchRefusesAPinWithNoReplacement(t *testing.T) {
	e := newArchiveEnv(t)
	chosen, stderr, err := e.fetch(t, "amd64", "hello", "2.10-3")
	if err == nil {
		t.Fatalf("fetch of a package the archive does not have used %q, want an error", chosen)
	}
	want := "testos: hello 2.10-3 (amd64) is not in the archive and has no replacement"
	if !strings.Contains(stderr, want) {
		t.Errorf("stderr does not say %q:\n%s", want, stderr)
	}
}
