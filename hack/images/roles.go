package main

import (
	"github.com/anvil-dev/anvil/internal/containerimage"
)

// archs are the architectures every image is built for (GOARCH and OCI names alike).
var archs = []string{"amd64", "arm64"}

// image is one image: how it runs, the Debian packages on top of anvil's layer (a file
// of hack/images, none for anvil itself), and whether it carries the bare-metal boot
// files (the eraser and the EFI system partition).
type image struct {
	name      string
	role      containerimage.Role
	packages  string
	bootFiles bool
}

var images = []image{
	// The manager, the poollet and the broker runtime: nothing but the binary.
	{name: "anvil", role: containerimage.Role{Title: "anvil", Entrypoint: []string{"/anvil"}, User: "65532:65532", Env: []string{containerimage.PathEnv}}},
	// The qemu runtime runs as root so that it can start each QEMU as anvil-qemu (-runas
	// needs root), the user /etc/passwd names: a guest that escapes into QEMU is not root.
	{name: "anvil-qemu", packages: "qemu.packages",
		role: containerimage.Role{Title: "anvil-qemu", Entrypoint: []string{"/anvil"}, User: "0:0", Env: []string{containerimage.PathEnv}}},
	// A bare-metal site: the metal runtime and Host controller with Ironic and
	// ironic-inspector as its children. Unprivileged: its state folder is a volume.
	{name: "anvil-metal", packages: "metal.packages", bootFiles: true,
		role: containerimage.Role{Title: "anvil-metal", Entrypoint: []string{"/anvil"}, User: "65532:65532", Env: []string{containerimage.PathEnv}}},
}

// The users of every image. anvil-qemu's ids are fixed so that files QEMU writes on a
// host's volumes have the same owner on every hypervisor.
const (
	passwd = "root:x:0:0:root:/root:/usr/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/nonexistent:/usr/sbin/nologin\n" +
		"anvil-qemu:x:65533:65533:anvil-qemu:/nonexistent:/usr/sbin/nologin\n"
	group = "root:x:0:\nnonroot:x:65532:\nanvil-qemu:x:65533:\n"
)

// Where the bare-metal boot files go in anvil-metal: the site's --eraser and --esp-image.
const (
	eraserDir = "usr/share/anvil/eraser"
	espImage  = "usr/share/anvil/esp.img"
)
