package main

import (
	"archive/tar"
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/anvil-dev/anvil/internal/containerimage"
	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/internal/registry"
	"github.com/anvil-dev/anvil/internal/registrynet"
)

var testSource = containerimage.Source{URL: sourceURL, Revision: "abc", Version: "v0.0.0-test", Created: time.Unix(1700000000, 0)}

// testBuild builds every image into a temporary folder from stand-ins: for each binary a
// file saying which it is, for Debian's root fakeDebian's.
func testBuild(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "kube-images")
	must(t, testBuilder(t, out, fakeDebian("xtables-nft-multi", "xtables-legacy-multi")).build(context.Background()))
	return out
}

func testBuilder(t *testing.T, out string, debian unpackFunc) *builder {
	t.Helper()
	bin := t.TempDir()
	for _, arch := range archs {
		must(t, os.MkdirAll(filepath.Join(bin, arch), 0o755))
		for _, im := range kubeImages {
			name := path.Base(im.binary)
			must(t, os.WriteFile(filepath.Join(bin, arch, name), []byte(name+" for "+arch), 0o755))
		}
	}
	return &builder{bin: bin, out: out, src: testSource, debian: debian, report: io.Discard}
}

// fakeDebian stands for debian.sh: a root with conntrack and the programs named, and
// iptables' own link to the nft one.
func fakeDebian(programs ...string) unpackFunc {
	return func(_ context.Context, packages, arch, out string) error {
		if packages != "proxy.packages" {
			return errors.New("unpacked an unknown package list " + packages)
		}
		sbin := filepath.Join(out, "rootfs", "usr", "sbin")
		if err := os.MkdirAll(sbin, 0o755); err != nil {
			return err
		}
		for _, f := range slices.Concat(programs, []string{"conntrack"}) {
			if err := os.WriteFile(filepath.Join(sbin, f), []byte(f+" for "+arch), 0o755); err != nil {
				return err
			}
		}
		// What the package ships; the names kube-proxy runs are update-alternatives' work.
		if err := os.Symlink("xtables-nft-multi", filepath.Join(sbin, "iptables-nft")); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(out, "VERSIONS"), []byte(arch+" iptables 1.8.9-2 0123\n"), 0o644)
	}
}

// A Debian root without the nft backend fails the build: kube-proxy's iptables would be a
// link to nothing. The DIGESTS of an earlier build do not outlive it.
func TestBuildRefusesALinkToNothing(t *testing.T) {
	out := t.TempDir()
	must(t, os.WriteFile(filepath.Join(out, "DIGESTS"), []byte("pause:3.10.2 sha256:0\n"), 0o644))
	err := testBuilder(t, out, fakeDebian("xtables-legacy-multi")).build(context.Background())
	if err == nil || !strings.Contains(err.Error(), "usr/sbin/iptables") {
		t.Fatalf("build: %v, want an error naming /usr/sbin/iptables", err)
	}
	if _, err := os.Stat(filepath.Join(out, "DIGESTS")); !os.IsNotExist(err) {
		t.Errorf("a failed build wrote DIGESTS (%v)", err)
	}
}

func TestImages(t *testing.T) {
	out := testBuild(t)
	local := "/usr/local/bin/"
	iptables := map[string]string{"usr/sbin/conntrack": "conntrack for ARCH", "usr/sbin/xtables-nft-multi": "xtables-nft-multi for ARCH"}
	for _, n := range []string{"iptables", "iptables-save", "iptables-restore", "ip6tables", "ip6tables-save", "ip6tables-restore"} {
		iptables["usr/sbin/"+n] = "-> xtables-nft-multi"
	}
	tests := []struct {
		name, tag  string
		entrypoint []string
		// files maps a path to its content, "-> TARGET" for a symlink; ARCH stands for the
		// image's architecture.
		files map[string]string
	}{
		{"kube-apiserver", "v1.36.3", []string{local + "kube-apiserver"}, map[string]string{"usr/local/bin/kube-apiserver": "kube-apiserver for ARCH"}},
		{"kube-controller-manager", "v1.36.3", []string{local + "kube-controller-manager"}, map[string]string{"usr/local/bin/kube-controller-manager": "kube-controller-manager for ARCH"}},
		{"kube-scheduler", "v1.36.3", []string{local + "kube-scheduler"}, map[string]string{"usr/local/bin/kube-scheduler": "kube-scheduler for ARCH"}},
		{"kube-proxy", "v1.36.3", []string{local + "kube-proxy"}, merge(iptables, map[string]string{"usr/local/bin/kube-proxy": "kube-proxy for ARCH"})},
		{"etcd", "3.6.16-0", []string{local + "etcd"}, map[string]string{"usr/local/bin/etcd": "etcd for ARCH"}},
		{"coredns", "v1.14.2", []string{"/coredns"}, map[string]string{"coredns": "coredns for ARCH"}},
		{"pause", "3.10.2", []string{"/pause"}, map[string]string{"pause": "pause for ARCH"}},
	}
	if len(tests) != len(kubeImages) {
		t.Fatalf("%d images built, %d checked", len(kubeImages), len(tests))
	}
	digests := readDigests(t, out)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(out, tc.name)
			idx, err := containerimage.ReadLayout(dir)
			must(t, err)
			if got, err := containerimage.LayoutTag(dir); err != nil || got != tc.tag {
				t.Errorf("the layout names its index %q (%v), want %q", got, err, tc.tag)
			}
			d, err := idx.Digest()
			must(t, err)
			if got := digests[tc.name+":"+tc.tag]; got != d.String() {
				t.Errorf("DIGESTS says %s:%s is %q, the layout holds %s", tc.name, tc.tag, got, d)
			}
			m, err := idx.IndexManifest()
			must(t, err)
			if len(m.Manifests) != len(archs) {
				t.Fatalf("%d manifests, want %d", len(m.Manifests), len(archs))
			}
			for i, arch := range archs {
				desc := m.Manifests[i]
				if p := desc.Platform; p == nil || p.OS != "linux" || p.Architecture != arch {
					t.Fatalf("manifest %d is for %+v, want linux/%s", i, p, arch)
				}
				img, err := idx.Image(desc.Digest)
				must(t, err)
				checkConfig(t, img, tc.name, tc.tag, arch, tc.entrypoint)
				files := flatten(t, img)
				want := merge(tc.files, map[string]string{"etc/passwd": passwd, "etc/group": group})
				for p, content := range want {
					content = strings.ReplaceAll(content, "ARCH", arch)
					if got, ok := files[p]; !ok || got != content {
						t.Errorf("%s: /%s holds %q, want %q", arch, p, got, content)
					}
				}
				if files["tmp/"] != "dir 1777" {
					t.Errorf("%s: /tmp is %q, want a directory of mode 1777", arch, files["tmp/"])
				}
			}
		})
	}
	raw, err := os.ReadFile(filepath.Join(out, "kube-proxy.VERSIONS"))
	must(t, err)
	if got, want := string(raw), "amd64 iptables 1.8.9-2 0123\narm64 iptables 1.8.9-2 0123\n"; got != want {
		t.Errorf("kube-proxy.VERSIONS %q, want %q", got, want)
	}
}

func checkConfig(t *testing.T, img v1.Image, name, tag, arch string, entrypoint []string) {
	t.Helper()
	cfg, err := img.ConfigFile()
	must(t, err)
	c := cfg.Config
	if cfg.Architecture != arch || cfg.OS != "linux" {
		t.Errorf("%s: config for %s/%s", arch, cfg.OS, cfg.Architecture)
	}
	if !slices.Equal(c.Entrypoint, entrypoint) || len(c.Cmd) != 0 {
		t.Errorf("%s: entrypoint %q cmd %q, want entrypoint %q alone", arch, c.Entrypoint, c.Cmd, entrypoint)
	}
	// kubeadm's static Pods name their binary without a folder.
	if !slices.ContainsFunc(c.Env, func(e string) bool {
		return strings.HasPrefix(e, "PATH=") && slices.Contains(strings.Split(e[5:], ":"), "/usr/local/bin")
	}) {
		t.Errorf("%s: env %q has no PATH with /usr/local/bin", arch, c.Env)
	}
	if c.User != "0:0" {
		t.Errorf("%s: user %q, want root", arch, c.User)
	}
	if c.Labels[containerimage.LabelVersion] != tag || c.Labels[containerimage.LabelTitle] != name || c.Labels[containerimage.LabelRevision] != "abc" {
		t.Errorf("%s: labels %v", arch, c.Labels)
	}
}

// flatten lists img's file system: a regular file's content, "-> TARGET" for a symlink,
// "dir MODE" for a folder (named with a trailing slash).
func flatten(t *testing.T, img v1.Image) map[string]string {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	files := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		must(t, err)
		switch h.Typeflag {
		case tar.TypeDir:
			files[strings.TrimSuffix(h.Name, "/")+"/"] = fmt.Sprintf("dir %04o", h.Mode)
		case tar.TypeSymlink:
			files[h.Name] = "-> " + h.Linkname
		case tar.TypeReg:
			body, err := io.ReadAll(tr)
			must(t, err)
			files[h.Name] = string(body)
			if h.Mode&0o111 == 0 && strings.Contains(h.Name, "bin/") {
				t.Errorf("%s is not executable (mode %o)", h.Name, h.Mode)
			}
		}
	}
}

// readDigests is DIGESTS as NAME:TAG → digest.
func readDigests(t *testing.T, out string) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join(out, "DIGESTS"))
	must(t, err)
	defer f.Close()
	digests := map[string]string{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		ref, digest, ok := strings.Cut(s.Text(), " ")
		if !ok || !strings.HasPrefix(digest, "sha256:") {
			t.Fatalf("DIGESTS line %q", s.Text())
		}
		digests[ref] = digest
	}
	must(t, s.Err())
	return digests
}

// The tags say what the binaries are: the versions hack/tools pins.
func TestTagsFollowThePins(t *testing.T) {
	tags := map[string]string{}
	for _, im := range kubeImages {
		tags[im.name] = im.tag
	}
	for _, tc := range []struct{ image, gomod, module, want string }{
		{"kube-apiserver", "kube", "k8s.io/kubernetes", tags["kube-apiserver"]},
		{"etcd", "etcd", "go.etcd.io/etcd/server/v3", "v" + strings.TrimSuffix(tags["etcd"], "-0")},
		{"coredns", "coredns", "github.com/coredns/coredns", tags["coredns"]},
	} {
		if got := requiredVersion(t, filepath.Join("..", "tools", tc.gomod, "go.mod"), tc.module); got != tc.want {
			t.Errorf("hack/tools/%s pins %s %s; the %s image's tag says %s", tc.gomod, tc.module, got, tc.image, tc.want)
		}
	}
	for _, im := range kubeImages {
		if strings.HasPrefix(im.name, "kube-") && im.tag != kubeVersion {
			t.Errorf("%s:%s, want %s", im.name, im.tag, kubeVersion)
		}
	}
}

// requiredVersion is the version of module that the go.mod at file requires.
func requiredVersion(t *testing.T, file, module string) string {
	t.Helper()
	raw, err := os.ReadFile(file)
	must(t, err)
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
		if len(f) >= 2 && f[0] == module {
			return f[1]
		}
	}
	t.Fatalf("%s requires no %s", file, module)
	return ""
}

// push sends every image to a registry that takes writes only with its push credential,
// read from the docker config DOCKER_CONFIG names, as PREFIX/NAME:TAG; a push without the
// credential is refused.
func TestPush(t *testing.T) {
	out := testBuild(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cred := registry.Credential{Username: "push", Password: "test-password"}
	reg, err := registry.Start(ctx, 0, "", &registry.Auth{Push: cred})
	must(t, err)
	defer func() { must(t, reg.Stop()) }()
	args := []string{"-out", out, "-registry", reg.Host + "/kube"}

	t.Setenv("DOCKER_CONFIG", t.TempDir())
	if err := runPush(ctx, args); err == nil {
		t.Fatal("a push without the credential succeeded")
	}
	docker := t.TempDir()
	must(t, registrynet.WriteLogins(filepath.Join(docker, "config.json"), registrynet.Login{Username: cred.Username, Password: cred.Password}, reg.Host))
	t.Setenv("DOCKER_CONFIG", docker)
	must(t, runPush(ctx, args))

	for ref, want := range readDigests(t, out) {
		r, err := osimage.ParseReference(reg.Host + "/kube/" + ref)
		must(t, err)
		idx, err := remote.Index(r, remote.WithContext(ctx))
		must(t, err)
		if got, _ := idx.Digest(); got.String() != want {
			t.Errorf("the registry's %s is %s, want %s", ref, got, want)
		}
	}
}

func merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
