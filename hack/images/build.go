package main

import (
	"context"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/anvil-dev/anvil/internal/containerimage"
)

// sourceURL is the images' org.opencontainers.image.source.
const sourceURL = "https://github.com/anvil-dev/anvil"

func runBuild(ctx context.Context, args []string) error {
	f := flag.NewFlagSet("build", flag.ExitOnError)
	out := f.String("out", "bin/images", "where the image layouts, SIZES, DIGESTS and the Debian packages' VERSIONS go")
	bin := f.String("bin", "bin", "the folder make eraser and make esp built eraser/ and esp.img into")
	version := f.String("version", "", "the images' version label and tag (default: git describe --tags --always --dirty)")
	only := f.String("image", "", "build only this image (anvil, anvil-qemu or anvil-metal); DIGESTS and SIZES then list it alone")
	_ = f.Parse(args)
	selected, err := selectImages(*only)
	if err != nil {
		return err
	}
	root, err := containerimage.GitRoot(ctx)
	if err != nil {
		return err
	}
	src, err := containerimage.GitSource(ctx, root, sourceURL, *version)
	if err != nil {
		return err
	}
	b := &builder{root: root, out: *out, bin: *bin, work: filepath.Join(*out, ".work"), src: src, images: selected}
	return b.build(ctx)
}

// selectImages is the images to build: all of them, or the one named.
func selectImages(name string) ([]image, error) {
	if name == "" {
		return images, nil
	}
	var known []string
	for _, im := range images {
		if im.name == name {
			return []image{im}, nil
		}
		known = append(known, im.name)
	}
	return nil, fmt.Errorf("no image %q: the images are %s", name, strings.Join(known, ", "))
}

type builder struct {
	root, out, bin, work string
	src                  containerimage.Source
	images               []image
}

func (b *builder) build(ctx context.Context) error {
	start := time.Now()
	if err := os.RemoveAll(b.work); err != nil {
		return err
	}
	layers := filepath.Join(b.work, "layers")
	if err := os.MkdirAll(layers, 0o755); err != nil {
		return err
	}
	boot, err := b.bootEntries()
	if err != nil {
		return err
	}
	// The CA bundle is the same for every architecture: made once, from amd64's packages.
	if err := b.debian(ctx, "base.packages", "amd64", "base"); err != nil {
		return err
	}
	ca, err := os.ReadFile(filepath.Join(b.work, "debian", "base", "rootfs", "etc/ssl/certs/ca-certificates.crt"))
	if err != nil {
		return err
	}
	// The anvil image's only Debian file is the bundle: its VERSIONS is that package's line.
	baseVersions, err := os.ReadFile(filepath.Join(b.work, "debian", "base", "VERSIONS"))
	if err != nil {
		return err
	}
	var caVersion []byte
	for _, line := range strings.SplitAfter(string(baseVersions), "\n") {
		if strings.HasPrefix(line, "amd64 ca-certificates ") {
			caVersion = []byte(line)
		}
	}
	anvilLayers := map[string]v1.Layer{}
	for _, arch := range archs {
		bin := filepath.Join(b.work, "anvil-"+arch)
		if err := b.goBuild(ctx, arch, bin); err != nil {
			return err
		}
		if anvilLayers[arch], err = containerimage.WriteLayer(layers, containerimage.Layer{Entries: anvilEntries(bin, ca)}, b.src); err != nil {
			return err
		}
	}
	bootLayer, err := containerimage.WriteLayer(layers, containerimage.Layer{Entries: boot}, b.src)
	if err != nil {
		return err
	}
	var sizes, digests []string
	for _, im := range b.images {
		imgs := map[string]v1.Image{}
		var versions []byte
		if im.packages == "" {
			versions = caVersion
		}
		for _, arch := range archs {
			ls := []v1.Layer{anvilLayers[arch]}
			history := []string{"anvil " + b.src.Version + " (CGO_ENABLED=0 GOARCH=" + arch + ")"}
			if im.packages != "" {
				name := im.name + "-" + arch
				if err := b.debian(ctx, im.packages, arch, name); err != nil {
					return err
				}
				rootfs := filepath.Join(b.work, "debian", name)
				v, err := os.ReadFile(filepath.Join(rootfs, "VERSIONS"))
				if err != nil {
					return err
				}
				versions = append(versions, v...)
				entries, err := containerimage.ReadTree(filepath.Join(rootfs, "rootfs"), "")
				if err != nil {
					return err
				}
				l, err := containerimage.WriteLayer(layers, containerimage.Layer{Entries: entries}, b.src)
				if err != nil {
					return err
				}
				// The unpacked root is in the layer now; the next one needs the room.
				if err := os.RemoveAll(rootfs); err != nil {
					return err
				}
				ls = append(ls, l)
				history = append(history, "Debian packages of hack/images/"+im.packages+" (/usr/share/anvil/VERSIONS)")
			}
			if im.bootFiles {
				ls = append(ls, bootLayer)
				history = append(history, "bare-metal boot files: /"+eraserDir+", /"+espImage)
			}
			img, err := containerimage.Image(containerimage.ConfigFile(im.role, arch, b.src), ls, history)
			if err != nil {
				return err
			}
			imgs[arch] = img
			s, err := containerimage.ImageSize(img)
			if err != nil {
				return err
			}
			sizes = append(sizes, containerimage.SizeLine(im.name, arch, s))
		}
		idx, err := containerimage.Index(imgs, b.src.Labels(im.name))
		if err != nil {
			return err
		}
		if err := containerimage.WriteLayout(filepath.Join(b.out, im.name), idx, b.src.Version); err != nil {
			return err
		}
		d, err := idx.Digest()
		if err != nil {
			return err
		}
		digests = append(digests, im.name+" "+d.String())
		if versions != nil {
			if err := os.WriteFile(filepath.Join(b.out, im.name+".VERSIONS"), versions, 0o644); err != nil {
				return err
			}
		}
	}
	if err := os.RemoveAll(b.work); err != nil {
		return err
	}
	if err := writeLines(filepath.Join(b.out, "DIGESTS"), digests); err != nil {
		return err
	}
	table := append([]string{containerimage.SizesHeader}, sizes...)
	if err := writeLines(filepath.Join(b.out, "SIZES"), table); err != nil {
		return err
	}
	fmt.Println(strings.Join(table, "\n"))
	fmt.Println(strings.Join(digests, "\n"))
	fmt.Printf("images: built %s in %s\n", b.src.Version, time.Since(start).Round(time.Second))
	return nil
}

func writeLines(path string, lines []string) error {
	return os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}

// goBuild builds a static anvil for arch into path.
func (b *builder) goBuild(ctx context.Context, arch, path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w -X main.version="+b.src.Version, "-o", abs, "./cmd/anvil")
	cmd.Dir = b.root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building anvil for %s: %w", arch, err)
	}
	return nil
}

// debian unpacks the closure of hack/images/PACKAGES for arch into work/debian/name.
func (b *builder) debian(ctx context.Context, packages, arch, name string) error {
	out, err := filepath.Abs(filepath.Join(b.work, "debian", name))
	if err != nil {
		return err
	}
	dir := filepath.Join(b.root, "hack", "images")
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "debian.sh"), filepath.Join(dir, packages), arch, out)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("hack/images/debian.sh %s %s: %w", packages, arch, err)
	}
	return nil
}

// anvilEntries is the layer every image starts with: the binary, the users, the CA bundle
// and a /tmp.
func anvilEntries(binary string, ca []byte) []containerimage.Entry {
	return []containerimage.Entry{
		containerimage.FromDisk("anvil", 0o755, binary),
		containerimage.Dir("etc", 0o755),
		containerimage.File("etc/group", 0o644, []byte(group)),
		containerimage.File("etc/passwd", 0o644, []byte(passwd)),
		containerimage.Dir("etc/ssl", 0o755),
		containerimage.Dir("etc/ssl/certs", 0o755),
		containerimage.File("etc/ssl/certs/ca-certificates.crt", 0o644, ca),
		containerimage.Dir("tmp", 0o777|fs.ModeSticky),
	}
}

// bootEntries is anvil-metal's layer of bare-metal boot files (make eraser, make esp),
// the same for every architecture: a site boots servers of any architecture.
func (b *builder) bootEntries() ([]containerimage.Entry, error) {
	eraser := filepath.Join(b.bin, "eraser")
	esp := filepath.Join(b.bin, "esp.img")
	for _, p := range []string{filepath.Join(eraser, "VERSIONS"), esp, esp + ".VERSIONS"} {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("%w: run make eraser esp", err)
		}
	}
	entries := []containerimage.Entry{
		containerimage.Dir("usr", 0o755),
		containerimage.Dir("usr/share", 0o755),
		containerimage.Dir("usr/share/anvil", 0o755),
		containerimage.Dir(eraserDir, 0o755),
	}
	tree, err := containerimage.ReadTree(eraser, eraserDir)
	if err != nil {
		return nil, err
	}
	entries = append(entries, tree...)
	return append(entries,
		containerimage.FromDisk(espImage, 0o644, esp),
		containerimage.FromDisk(espImage+".VERSIONS", 0o644, esp+".VERSIONS")), nil
}
