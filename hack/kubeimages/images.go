package main

import (
	"io/fs"
	"path"

	"github.com/anvil-dev/anvil/internal/containerimage"
)

// archs are the architectures of every image (GOARCH and OCI names alike).
var archs = []string{"amd64", "arm64"}

// kubeVersion is the Kubernetes release of the control plane's and kube-proxy's images:
// kubeadm's own (hack/tools/kube).
const kubeVersion = "v1.36.3"

// kubeImage is one image kubeadm pulls: its binary, read from -bin/ARCH/NAME and put at
// binary in the image, and for kube-proxy Debian packages beneath it.
type kubeImage struct {
	name, tag string
	// binary is where the binary goes: a slash path from the image's root.
	binary     string
	entrypoint []string
	// packages is a package list of hack/kubeimages whose closure is unpacked with
	// hack/images/debian.sh; empty for none.
	packages string
	// links are symlinks made in the Debian root, the work of maintainer scripts that
	// dpkg-deb -x does not run.
	links []link
}

// link is a symlink at name (a slash path from the image's root) to target.
type link struct{ name, target string }

var kubeImages = []kubeImage{
	// kubeadm's static Pods run `command: [kube-apiserver, ...]`: found through PATH.
	controlPlane("kube-apiserver"),
	controlPlane("kube-controller-manager"),
	controlPlane("kube-scheduler"),
	// kube-proxy's iptables mode runs iptables, iptables-save, iptables-restore, their
	// ip6tables twins and conntrack. update-alternatives would point the iptables names at
	// a backend; they point at the nft one (xtables-nft-multi), since the node image's own
	// iptables is Debian's with its default, nft: rules written through one backend are
	// invisible to the other, so kube-proxy and the node must use the same.
	{name: "kube-proxy", tag: kubeVersion, binary: "usr/local/bin/kube-proxy",
		entrypoint: []string{"/usr/local/bin/kube-proxy"}, packages: "proxy.packages",
		links: iptablesLinks("xtables-nft-multi")},
	// etcd 3.6.16 (hack/tools/etcd); "-0" is the image's revision, as kubeadm's tags have.
	// kubeadm's default is another release: clusters set etcd.local.imageTag.
	{name: "etcd", tag: "3.6.16-0", binary: "usr/local/bin/etcd", entrypoint: []string{"/usr/local/bin/etcd"}},
	// kubeadm's CoreDNS Deployment gives only args (-conf /etc/coredns/Corefile).
	{name: "coredns", tag: "v1.14.2", binary: "coredns", entrypoint: []string{"/coredns"}},
	{name: "pause", tag: "3.10.2", binary: "pause", entrypoint: []string{"/pause"}},
}

func controlPlane(name string) kubeImage {
	return kubeImage{name: name, tag: kubeVersion, binary: "usr/local/bin/" + name, entrypoint: []string{"/usr/local/bin/" + name}}
}

// iptablesLinks points the iptables programs kube-proxy runs at backend, in /usr/sbin.
func iptablesLinks(backend string) []link {
	var links []link
	for _, family := range []string{"iptables", "ip6tables"} {
		for _, suffix := range []string{"", "-save", "-restore"} {
			links = append(links, link{name: "usr/sbin/" + family + suffix, target: backend})
		}
	}
	return links
}

// role is how im runs: as root, kubeadm's default for every one of these Pods.
func (im kubeImage) role() containerimage.Role {
	return containerimage.Role{Title: im.name, Entrypoint: im.entrypoint, User: "0:0", Env: []string{containerimage.PathEnv}}
}

// The users every image knows (root, and nonroot for a Pod that asks for 65532) and the
// /tmp Go's os.TempDir names: what a distroless base would give.
const (
	passwd = "root:x:0:0:root:/root:/usr/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/nonexistent:/usr/sbin/nologin\n"
	group = "root:x:0:\nnonroot:x:65532:\n"
)

// binaryEntries is im's own layer: the users, /tmp, and the binary at im.binary (its
// folders first), read from file.
func (im kubeImage) binaryEntries(file string) []containerimage.Entry {
	entries := []containerimage.Entry{
		containerimage.Dir("etc", 0o755),
		containerimage.File("etc/group", 0o644, []byte(group)),
		containerimage.File("etc/passwd", 0o644, []byte(passwd)),
		containerimage.Dir("tmp", 0o777|fs.ModeSticky),
	}
	var dirs []string
	for d := path.Dir(im.binary); d != "."; d = path.Dir(d) {
		dirs = append([]string{d}, dirs...)
	}
	for _, d := range dirs {
		entries = append(entries, containerimage.Dir(d, 0o755))
	}
	return append(entries, containerimage.FromDisk(im.binary, 0o755, file))
}
