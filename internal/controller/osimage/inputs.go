package osimage

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	imagesv1alpha1 "github.com/anvil-dev/anvil/api/images/v1alpha1"
	"github.com/anvil-dev/anvil/internal/imagebuild"
	"github.com/anvil-dev/anvil/internal/imagebuild/containerfile"
	"github.com/anvil-dev/anvil/internal/osimage"
)

// refusal is a problem with an OSImage's inputs that its user fixes: it becomes the Ready
// condition's reason and message, and no build starts.
type refusal struct {
	reason, msg string
}

func (r *refusal) Error() string { return r.msg }

func refuse(reason, format string, a ...any) error {
	return &refusal{reason: reason, msg: fmt.Sprintf(format, a...)}
}

// inputs is an OSImage's inputs as read from the API and the registry.
type inputs struct {
	archs   []computev1alpha1.Architecture
	context map[string][]byte // every context file, by path
	recipe  imagebuild.Recipe
	base    string // pinned index reference
	entries map[computev1alpha1.Architecture]string
	builder map[computev1alpha1.Architecture]string
	plans   map[computev1alpha1.Architecture]imagebuild.Arch
	hashes  map[string]string
	// rootDisk is each architecture's scratch disk for a base with a disk root (0: none).
	rootDisk map[computev1alpha1.Architecture]int64
	// guestBase and guestOutput are the base's and output's repositories as builders
	// reach them; outputRepository is the output's as the registry names it (no host).
	guestBase, guestOutput, outputRepository string
}

// readContext reads every context file from its ConfigMap or Secret key (uncached: the
// manager keeps no cache of Secrets).
func (r *OSImageReconciler) readContext(ctx context.Context, o *imagesv1alpha1.OSImage) (map[string][]byte, error) {
	files := map[string][]byte{}
	for _, f := range o.Spec.Context {
		var data []byte
		var kind string
		var ref *imagesv1alpha1.KeyReference
		if f.ConfigMapKeyRef != nil {
			kind, ref = "ConfigMap", f.ConfigMapKeyRef
			cm := &corev1.ConfigMap{}
			if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: ref.Name}, cm); err != nil {
				if apierrors.IsNotFound(err) {
					return nil, refuse(imagesv1alpha1.ReasonContextMissing, "context %s: ConfigMap %q does not exist", f.Path, ref.Name)
				}
				return nil, err
			}
			if s, ok := cm.Data[ref.Key]; ok {
				data = []byte(s)
			} else if b, ok := cm.BinaryData[ref.Key]; ok {
				data = b
			} else {
				return nil, refuse(imagesv1alpha1.ReasonContextMissing, "context %s: %s %q has no key %q", f.Path, kind, ref.Name, ref.Key)
			}
		} else {
			kind, ref = "Secret", f.SecretKeyRef
			s := &corev1.Secret{}
			if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: ref.Name}, s); err != nil {
				if apierrors.IsNotFound(err) {
					return nil, refuse(imagesv1alpha1.ReasonContextMissing, "context %s: Secret %q does not exist", f.Path, ref.Name)
				}
				return nil, err
			}
			b, ok := s.Data[ref.Key]
			if !ok {
				return nil, refuse(imagesv1alpha1.ReasonContextMissing, "context %s: %s %q has no key %q", f.Path, kind, ref.Name, ref.Key)
			}
			data = b
		}
		files[f.Path] = data
	}
	return files, nil
}

// resolve reads everything the per-architecture hashes depend on and computes them.
func (r *OSImageReconciler) resolve(ctx context.Context, o *imagesv1alpha1.OSImage, archs []computev1alpha1.Architecture) (*inputs, error) {
	in := &inputs{archs: archs, plans: map[computev1alpha1.Architecture]imagebuild.Arch{}, hashes: map[string]string{},
		rootDisk: map[computev1alpha1.Architecture]int64{}}
	var err error
	if in.context, err = r.readContext(ctx, o); err != nil {
		return nil, err
	}
	in.recipe = imagebuild.Recipe{Containerfiles: o.Spec.Containerfiles, Context: map[string]string{}, KernelCommandLine: o.Spec.KernelCommandLine}
	for p, b := range in.context {
		in.recipe.Context[p] = imagebuild.ContentDigest(b)
	}
	// The recipe is planned before the registry is asked anything: a typo is found at once.
	// The entries' digests are filled in once they are read.
	for _, a := range archs {
		plan, err := in.recipe.ForArchitecture(string(a), "", "")
		if err != nil {
			return nil, refuse(imagesv1alpha1.ReasonInvalidRecipe, "%v", err)
		}
		in.plans[a] = plan
		if step, ok := imagebuild.PackageManagerStep(plan.Program); ok && r.Config.PackageProxy == "" {
			return nil, refuse(imagesv1alpha1.ReasonNoPackageProxy, "%v", &containerfile.Error{File: step.File, Line: step.Line,
				Msg: step.Original + ": apt fetches packages, and the builders' network offers no package proxy: set the manager's --builder-package-proxy (anvil dev: --package-proxy HOST:PORT)"})
		}
	}
	if in.guestBase, err = r.Config.guestReference(o.Spec.Base); err != nil {
		return nil, refuse(imagesv1alpha1.ReasonBaseUnavailable, "base: %v", err)
	}
	// Before any read of the base: the manager reads with its own credential, and the
	// builders' credential would read it too, so another tenant's image is never touched.
	if err := r.Config.folders().Use(o.Namespace, strings.TrimPrefix(in.guestBase, r.Config.GuestRegistry+"/")); err != nil {
		return nil, refuse(imagesv1alpha1.ReasonBaseNotOwned, "base: %v", err)
	}
	if in.guestOutput, err = r.Config.guestReference(o.Spec.Output.Repository); err != nil {
		return nil, refuse(imagesv1alpha1.ReasonRegistryError, "output: %v", err)
	}
	in.outputRepository = strings.TrimPrefix(in.guestOutput, r.Config.GuestRegistry+"/")
	if err := r.Config.folders().Publish(o.Namespace, in.outputRepository); err != nil {
		return nil, refuse(imagesv1alpha1.ReasonOutputNotOwned, "output: %v", err)
	}
	if in.base, in.entries, err = indexEntries(ctx, o.Spec.Base); err != nil {
		switch {
		case errors.Is(err, osimage.ErrImageNotFound):
			return nil, refuse(imagesv1alpha1.ReasonBaseUnavailable, "base %s does not exist", o.Spec.Base)
		case errors.Is(err, errNotOSImageIndex), errors.Is(err, osimage.ErrBadReference):
			return nil, refuse(imagesv1alpha1.ReasonBaseNotOSImage, "base: %v", err)
		}
		return nil, fmt.Errorf("reading the base: %w", err)
	}
	var missing []string
	for _, a := range archs {
		if in.entries[a] == "" {
			missing = append(missing, string(a))
		}
	}
	if len(missing) > 0 {
		return nil, refuse(imagesv1alpha1.ReasonBaseLacksArch, "base %s has no entry for %s (it has %s)", o.Spec.Base, strings.Join(missing, ", "), archList(in.entries))
	}
	if _, in.builder, err = indexEntries(ctx, r.Config.BuilderImage); err != nil {
		return nil, refuse(imagesv1alpha1.ReasonBuilderUnavailable, "builder image: %v", err)
	}
	for _, a := range archs {
		if in.builder[a] == "" {
			return nil, refuse(imagesv1alpha1.ReasonBuilderUnavailable, "the builder image %s has no %s entry: anvil cannot build for %s", r.Config.BuilderImage, a, a)
		}
		root, err := r.roots.read(ctx, in.base[:strings.LastIndex(in.base, "@")], in.entries[a])
		if err != nil {
			return nil, fmt.Errorf("reading the base's %s entry: %w", a, err)
		}
		if !root.kernel {
			return nil, refuse(imagesv1alpha1.ReasonBaseNotBootable, "base %s: the %s entry has no kernel: it is not bootable (a build's image boots its base's kernel, or the one its steps install in /boot)", o.Spec.Base, a)
		}
		if root.diskBytes > 0 {
			in.rootDisk[a] = scratchDiskBytes(root.diskBytes)
		}
		plan := in.plans[a]
		plan.Inputs.BaseDigest, plan.Inputs.BuilderDigest = in.entries[a], in.builder[a]
		in.plans[a] = plan
		in.hashes[string(a)] = plan.Inputs.Hash()
	}
	return in, nil
}

func archList(m map[computev1alpha1.Architecture]string) string {
	var out []string
	for a := range m {
		out = append(out, string(a))
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}
