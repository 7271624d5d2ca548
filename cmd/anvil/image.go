package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/spf13/cobra"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/osimage"
)

// The files `anvil image push` reads from each --from folder.
const (
	kernelFile    = "kernel"
	initramfsFile = "initramfs"
	diskRawFile   = "disk.raw"
	diskQCOW2File = "disk.qcow2"
	cmdlineFile   = "cmdline"
)

func newImageCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "image", Short: "Build and publish multi-architecture OS images"}
	cmd.AddCommand(newImagePushCommand())
	return cmd
}

func newImagePushCommand() *cobra.Command {
	var from []string
	cmd := &cobra.Command{
		Use:   "push REFERENCE --from ARCH=DIR [--from ARCH=DIR ...]",
		Short: "Build one OS image per architecture from local files and push them under one image index",
		Long: `Build one OS image per architecture from local files and push them under one image index.

Each DIR holds:
  kernel                    the kernel (needed unless there is a disk)
  initramfs                 optional
  disk.raw or disk.qcow2    optional, at most one
  cmdline                   optional, one line: the kernel command line

ARCH is an OCI architecture name (amd64, arm64, ...). The index lists the images sorted by
platform, so the same files always give the same digest. On success the command prints
REPOSITORY@sha256:<index digest> on stdout.`,
		Example: "  anvil image push 127.0.0.1:5000/anvil/testos:1 --from amd64=bin/testos/amd64 --from arm64=bin/testos/arm64",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := name.ParseReference(args[0])
			if err != nil {
				return fmt.Errorf("image reference %q: %w", args[0], err)
			}
			sources, err := parseFromFlags(from)
			if err != nil {
				return err
			}
			images := make([]v1.Image, 0, len(sources))
			for _, arch := range sortedArchitectures(sources) {
				files, err := filesFromDir(arch, sources[arch])
				if err != nil {
					return err
				}
				img, err := osimage.Build(files)
				if err != nil {
					return err
				}
				d, err := img.Digest()
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "%s: %s from %s\n", arch, d, sources[arch])
				images = append(images, img)
			}
			idx, err := osimage.Index(images...)
			if err != nil {
				return err
			}
			digest, err := osimage.Push(cmd.Context(), args[0], idx)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s@%s\n", ref.Context().Name(), digest)
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&from, "from", nil, "ARCH=DIR: build ARCH's image from the files in DIR (repeat per architecture)")
	_ = cmd.MarkFlagRequired("from")
	return cmd
}

// parseFromFlags reads ARCH=DIR pairs, refusing unknown and repeated architectures.
func parseFromFlags(from []string) (map[computev1alpha1.Architecture]string, error) {
	sources := map[computev1alpha1.Architecture]string{}
	for _, f := range from {
		a, dir, ok := strings.Cut(f, "=")
		if !ok || a == "" || dir == "" {
			return nil, fmt.Errorf("--from %q: want ARCH=DIR, e.g. amd64=bin/testos/amd64", f)
		}
		arch := computev1alpha1.Architecture(a)
		if !arch.IsKnown() {
			return nil, fmt.Errorf("--from %q: unknown architecture %q; use one of %v (OCI names: x86_64 is amd64, aarch64 is arm64)",
				f, a, computev1alpha1.KnownArchitectures)
		}
		if prev, dup := sources[arch]; dup {
			return nil, fmt.Errorf("--from %q: architecture %s is already built from %s", f, arch, prev)
		}
		sources[arch] = dir
	}
	return sources, nil
}

func sortedArchitectures(sources map[computev1alpha1.Architecture]string) []computev1alpha1.Architecture {
	archs := make([]computev1alpha1.Architecture, 0, len(sources))
	for a := range sources {
		archs = append(archs, a)
	}
	sort.Slice(archs, func(i, j int) bool { return archs[i] < archs[j] })
	return archs
}

// filesFromDir names the boot artifacts in dir. A file it does not know is an error, so a
// misnamed initramfs is not silently left out of the image.
func filesFromDir(arch computev1alpha1.Architecture, dir string) (osimage.Files, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return osimage.Files{}, fmt.Errorf("%s: %w", arch, err)
	}
	f := osimage.Files{Architecture: arch}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		switch e.Name() {
		case kernelFile:
			f.Kernel = p
		case initramfsFile:
			f.Initramfs = p
		case diskRawFile, diskQCOW2File:
			if f.Disk != "" {
				return osimage.Files{}, fmt.Errorf("%s: %s holds both %s and %s; keep one", arch, dir, diskRawFile, diskQCOW2File)
			}
			f.Disk, f.DiskFormat = p, osimage.DiskFormatRaw
			if e.Name() == diskQCOW2File {
				f.DiskFormat = osimage.DiskFormatQCOW2
			}
		case cmdlineFile:
			if f.KernelCommandLine, err = readCmdline(p); err != nil {
				return osimage.Files{}, fmt.Errorf("%s: %w", arch, err)
			}
		default:
			return osimage.Files{}, fmt.Errorf("%s: %s holds %q; expected only %s, %s, %s or %s, and %s",
				arch, dir, e.Name(), kernelFile, initramfsFile, diskRawFile, diskQCOW2File, cmdlineFile)
		}
	}
	if f.Kernel == "" && f.Disk == "" {
		return osimage.Files{}, fmt.Errorf("%s: %s has no %s and no %s or %s; an OS image needs a kernel, a disk or both",
			arch, dir, kernelFile, diskRawFile, diskQCOW2File)
	}
	return f, nil
}

// readCmdline reads a one-line kernel command line; a final newline is not part of it.
func readCmdline(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	line := strings.TrimRight(string(b), "\r\n")
	if strings.ContainsAny(line, "\r\n") {
		return "", fmt.Errorf("%s: the kernel command line must be one line", path)
	}
	return strings.TrimSpace(line), nil
}
