package config

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Images are the images config/ names (the three make images builds), each an overlay's
// images: entry replaces.
var Images = []string{"anvil", "anvil-qemu", "anvil-metal"}

// Overlay is a kustomization on top of folders of config/.
type Overlay struct {
	// Bases are the kustomizations it builds on (folders, absolute or relative to the
	// overlay's own).
	Bases []string
	// Images maps each of Images to where it is: REPOSITORY@DIGEST or REPOSITORY:TAG.
	Images map[string]string
	// Args are arguments added to containers, by "Kind/name/container-index".
	Args map[string][]string
	// SingleNode lets the manager and the metal site run on a hypervisor node: one node that
	// is everything (an evaluation, the install test). A fleet keeps them off (docs/security.md).
	SingleNode bool
}

// offHypervisorNodes are the workloads whose shipped node affinity keeps them off hypervisor
// nodes, which SingleNode removes.
var offHypervisorNodes = []string{"Deployment/anvil-controller-manager", "Deployment/anvil-metal-site", "Deployment/anvil-capi-provider"}

// Write writes the overlay's kustomization.yaml into dir (made if missing); the bases'
// paths are written relative to dir, as kustomize wants them.
func (o Overlay) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("# Written by anvil (config.Overlay): where this cluster's images are.\n")
	b.WriteString("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n")
	for _, base := range o.Bases {
		if filepath.IsAbs(base) {
			if base, err = filepath.Rel(abs, base); err != nil {
				return err
			}
		}
		fmt.Fprintf(&b, "- %s\n", base)
	}
	b.WriteString("images:\n")
	for _, name := range Images {
		ref, ok := o.Images[name]
		if !ok {
			return fmt.Errorf("overlay: where image %s is was not given", name)
		}
		if repo, digest, ok := strings.Cut(ref, "@"); ok {
			fmt.Fprintf(&b, "- name: %s\n  newName: %s\n  digest: %s\n", name, repo, digest)
		} else {
			i := strings.LastIndex(ref, ":")
			if i < 0 || strings.Contains(ref[i:], "/") {
				return fmt.Errorf("overlay: image %s at %q: give REPOSITORY@DIGEST or REPOSITORY:TAG", name, ref)
			}
			fmt.Fprintf(&b, "- name: %s\n  newName: %s\n  newTag: %s\n", name, ref[:i], ref[i+1:])
		}
	}
	if len(o.Args) > 0 || o.SingleNode {
		b.WriteString("patches:\n")
	}
	if o.SingleNode {
		for _, target := range offHypervisorNodes {
			kind, name, _ := strings.Cut(target, "/")
			fmt.Fprintf(&b, "- target: {kind: %s, name: %s}\n  patch: |-\n    - op: remove\n      path: /spec/template/spec/affinity\n", kind, name)
		}
	}
	if len(o.Args) > 0 {
		for _, target := range sortedKeys(o.Args) {
			parts := strings.Split(target, "/")
			if len(parts) != 3 {
				return fmt.Errorf("overlay: args target %q: use Kind/name/container-index", target)
			}
			fmt.Fprintf(&b, "- target: {kind: %s, name: %s}\n  patch: |-\n", parts[0], parts[1])
			for _, a := range o.Args[target] {
				fmt.Fprintf(&b, "    - op: add\n      path: /spec/template/spec/containers/%s/args/-\n      value: %q\n", parts[2], a)
			}
		}
	}
	return os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(b.String()), 0o644)
}

func sortedKeys(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
