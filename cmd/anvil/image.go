package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/osimage"
)

func newImageCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "image", Short: "Build and publish multi-architecture OS images"}
	cmd.AddCommand(newImagePushCommand())
	return cmd
}

func newImagePushCommand() *cobra.Command {
	var from, annotate []string
	cmd := &cobra.Command{
		Use:   "push REFERENCE --from ARCH=DIR [--from ARCH=DIR ...] [--annotation KEY=VALUE ...]",
		Short: "Build one OS image per architecture from local files and push them under one image index",
		Long: `Build one OS image per architecture from local files and push them under one image index.

Each DIR holds:
  kernel                    the kernel (needed unless there is a disk)
  initramfs                 optional
  disk.raw or disk.qcow2    optional, at most one
  cmdline                   optional, one line: the kernel command line

ARCH is an OCI architecture name (amd64, arm64, ...). The index lists the images sorted by
platform, so the same files always give the same digest. Each --annotation goes on the index
and on every image's manifest: what the image says of itself, which Machines'
requiredImageAnnotations ask for (dev.anvil.kubernetes.version=v1.36.3 for a Kubernetes node
image). On success the command prints REPOSITORY@sha256:<index digest> on stdout.`,
		Example: "  anvil image push 127.0.0.1:5000/anvil/testos:1 --from amd64=bin/testos/amd64 --from arm64=bin/testos/arm64",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sources, err := parseFromFlags(from)
			if err != nil {
				return err
			}
			annotations, err := parseAnnotationFlags(annotate)
			if err != nil {
				return err
			}
			pushed, digests, err := osimage.PushDirs(cmd.Context(), args[0], sources, annotations)
			if err != nil {
				return err
			}
			for _, arch := range sortedArchitectures(sources) {
				fmt.Fprintf(cmd.ErrOrStderr(), "%s: %s from %s\n", arch, digests[arch], sources[arch])
			}
			fmt.Fprintln(cmd.OutOrStdout(), pushed)
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&from, "from", nil, "ARCH=DIR: build ARCH's image from the files in DIR (repeat per architecture)")
	cmd.Flags().StringArrayVar(&annotate, "annotation", nil, "KEY=VALUE: an annotation of the index and its images (repeat per annotation)")
	_ = cmd.MarkFlagRequired("from")
	return cmd
}

// parseAnnotationFlags reads KEY=VALUE pairs (the value may be empty), refusing an empty or
// repeated key.
func parseAnnotationFlags(pairs []string) (map[string]string, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	annotations := map[string]string{}
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--annotation %q: want KEY=VALUE, e.g. %s=v1.36.3", p, computev1alpha1.ImageAnnotationKubernetesVersion)
		}
		if prev, dup := annotations[k]; dup {
			return nil, fmt.Errorf("--annotation %q: %s is already %q", p, k, prev)
		}
		annotations[k] = v
	}
	return annotations, nil
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
