package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/anvil-dev/anvil/internal/containerimage"
)

// sourceURL is the images' org.opencontainers.image.source: anvil, which built them.
const sourceURL = "https://github.com/anvil-dev/anvil"

func runBuild(ctx context.Context, args []string) error {
	f := flag.NewFlagSet("build", flag.ExitOnError)
	bin := f.String("bin", "bin/kube", "the folder holding each image's static binary as ARCH/NAME")
	out := f.String("out", "bin/kube-images", "where the image layouts, DIGESTS, SIZES and kube-proxy.VERSIONS go")
	_ = f.Parse(args)
	root, err := containerimage.GitRoot(ctx)
	if err != nil {
		return err
	}
	src, err := containerimage.GitSource(ctx, root, sourceURL, "")
	if err != nil {
		return err
	}
	b := &builder{bin: *bin, out: *out, src: src, debian: debianScript(root), report: os.Stdout}
	start := time.Now()
	if err := b.build(ctx); err != nil {
		return err
	}
	fmt.Printf("kubeimages: built in %s\n", time.Since(start).Round(time.Second))
	return nil
}

// unpackFunc unpacks the closure of hack/kubeimages/PACKAGES for arch into out: the root
// in out/rootfs, the packages used ("ARCH PACKAGE VERSION SHA256" lines) in out/VERSIONS.
type unpackFunc func(ctx context.Context, packages, arch, out string) error

// debianScript is hack/images/debian.sh of the checkout at root.
func debianScript(root string) unpackFunc {
	return func(ctx context.Context, packages, arch, out string) error {
		cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "images", "debian.sh"),
			filepath.Join(root, "hack", "kubeimages", packages), arch, out)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("hack/images/debian.sh hack/kubeimages/%s %s: %w", packages, arch, err)
		}
		return nil
	}
}

type builder struct {
	bin, out string
	// src labels every image; each image's version label is its tag.
	src    containerimage.Source
	debian unpackFunc
	// report gets the SIZES and DIGESTS of a finished build.
	report io.Writer
}

func (b *builder) build(ctx context.Context) error {
	// DIGESTS is written last, so that one there means a build that finished.
	if err := os.Remove(filepath.Join(b.out, "DIGESTS")); err != nil && !os.IsNotExist(err) {
		return err
	}
	work := filepath.Join(b.out, ".work")
	if err := os.RemoveAll(work); err != nil {
		return err
	}
	layers := filepath.Join(work, "layers")
	if err := os.MkdirAll(layers, 0o755); err != nil {
		return err
	}
	var sizes, digests []string
	for _, im := range kubeImages {
		src := b.src
		src.Version = im.tag
		imgs := map[string]v1.Image{}
		var versions []byte
		for _, arch := range archs {
			img, v, err := b.image(ctx, im, arch, work, layers, src)
			if err != nil {
				return err
			}
			imgs[arch], versions = img, append(versions, v...)
			s, err := containerimage.ImageSize(img)
			if err != nil {
				return err
			}
			sizes = append(sizes, containerimage.SizeLine(im.name, arch, s))
		}
		idx, err := containerimage.Index(imgs, src.Labels(im.name))
		if err != nil {
			return err
		}
		if err := containerimage.WriteLayout(filepath.Join(b.out, im.name), idx, im.tag); err != nil {
			return err
		}
		d, err := idx.Digest()
		if err != nil {
			return err
		}
		digests = append(digests, im.name+":"+im.tag+" "+d.String())
		if versions != nil {
			if err := os.WriteFile(filepath.Join(b.out, im.name+".VERSIONS"), versions, 0o644); err != nil {
				return err
			}
		}
	}
	if err := os.RemoveAll(work); err != nil {
		return err
	}
	table := append([]string{containerimage.SizesHeader}, sizes...)
	if err := writeLines(filepath.Join(b.out, "SIZES"), table); err != nil {
		return err
	}
	if err := writeLines(filepath.Join(b.out, "DIGESTS"), digests); err != nil {
		return err
	}
	_, err := fmt.Fprintf(b.report, "%s\n%s\n", strings.Join(table, "\n"), strings.Join(digests, "\n"))
	return err
}

// image is im for arch, its layers written into layers: Debian's root when im has
// packages (their VERSIONS lines returned too), then im's own layer.
func (b *builder) image(ctx context.Context, im kubeImage, arch, work, layers string, src containerimage.Source) (v1.Image, []byte, error) {
	var ls []v1.Layer
	var history []string
	var versions []byte
	if im.packages != "" {
		l, v, err := b.debianLayer(ctx, im, arch, work, layers, src)
		if err != nil {
			return nil, nil, err
		}
		ls, versions = append(ls, l), v
		history = append(history, "Debian packages of hack/kubeimages/"+im.packages+" (/usr/share/anvil/VERSIONS)")
	}
	file := filepath.Join(b.bin, arch, path.Base(im.binary))
	if _, err := os.Stat(file); err != nil {
		return nil, nil, fmt.Errorf("the binary of %s: %w", im.name, err)
	}
	l, err := containerimage.WriteLayer(layers, containerimage.Layer{Entries: im.binaryEntries(file)}, src)
	if err != nil {
		return nil, nil, err
	}
	ls = append(ls, l)
	history = append(history, "/"+im.binary+" ("+arch+"), /etc/passwd, /etc/group, /tmp")
	img, err := containerimage.Image(containerimage.ConfigFile(im.role(), arch, src), ls, history)
	return img, versions, err
}

// debianLayer unpacks im's packages for arch, makes im's links, and writes the root as a
// layer into layers; it returns the layer and the packages' VERSIONS lines.
func (b *builder) debianLayer(ctx context.Context, im kubeImage, arch, work, layers string, src containerimage.Source) (v1.Layer, []byte, error) {
	dir := filepath.Join(work, "debian", im.name+"-"+arch)
	if err := b.debian(ctx, im.packages, arch, dir); err != nil {
		return nil, nil, err
	}
	rootfs := filepath.Join(dir, "rootfs")
	for _, l := range im.links {
		p := filepath.Join(rootfs, filepath.FromSlash(l.name))
		// A link to nothing would fail only when kube-proxy runs it.
		if _, err := os.Stat(filepath.Join(filepath.Dir(p), l.target)); err != nil {
			return nil, nil, fmt.Errorf("%s: the link /%s: %w", im.name, l.name, err)
		}
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			return nil, nil, err
		}
		if err := os.Symlink(l.target, p); err != nil {
			return nil, nil, err
		}
	}
	versions, err := os.ReadFile(filepath.Join(dir, "VERSIONS"))
	if err != nil {
		return nil, nil, err
	}
	entries, err := containerimage.ReadTree(rootfs, "")
	if err != nil {
		return nil, nil, err
	}
	l, err := containerimage.WriteLayer(layers, containerimage.Layer{Entries: entries}, src)
	if err != nil {
		return nil, nil, err
	}
	// The root is in the layer now; the next architecture's needs the room.
	return l, versions, os.RemoveAll(dir)
}

func writeLines(file string, lines []string) error {
	return os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}
