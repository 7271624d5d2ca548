package osimage

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	imagesv1alpha1 "github.com/anvil-dev/anvil/api/images/v1alpha1"
	"github.com/anvil-dev/anvil/internal/buildagent"
	"github.com/anvil-dev/anvil/internal/imagebuild"
)

// ensureJobs writes the build's job Secret once: one job per architecture, from the same
// reading of the inputs the build's hashes came from. The Secret is what the build runs;
// the OSImage may change after it.
func (r *OSImageReconciler) ensureJobs(ctx context.Context, o *imagesv1alpha1.OSImage, in *inputs, b *imagesv1alpha1.OSImageBuild) error {
	key := client.ObjectKey{Namespace: b.Namespace, Name: imagebuild.JobSecretName(b.Name)}
	if err := r.APIReader.Get(ctx, key, &corev1.Secret{}); err == nil {
		return nil
	} else if !apierrors.IsNotFound(err) {
		return err
	}
	docker, err := r.dockerConfig(ctx, o, in, time.Now())
	if err != nil {
		return err
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace}, Data: map[string][]byte{}}
	for _, a := range in.archs {
		plan := in.plans[a]
		job := buildagent.Job{
			Architecture: string(a), Base: in.guestBase + "@" + in.entries[a], Output: in.guestOutput,
			Tag: imagebuild.HashTag(string(a), in.hashes[string(a)]), Program: plan.Program,
			Context: map[string][]byte{}, KernelCommandLine: o.Spec.KernelCommandLine, DockerConfig: docker,
			// The build's time, fixed by its inputs: a rebuild of the same inputs packs the same bytes.
			SourceDateEpoch: 0,
			RootDiskBytes:   in.rootDisk[a], PackageProxy: r.Config.PackageProxy,
		}
		if r.Config.GuestPlainHTTP {
			job.PlainHTTP = []string{r.Config.GuestRegistry}
		}
		for _, p := range plan.Program.ContextFiles {
			job.Context[p] = in.context[p]
		}
		raw, err := json.Marshal(job)
		if err != nil {
			return err
		}
		s.Data[string(a)] = raw
	}
	if err := controllerutil.SetControllerReference(b, s, r.Client.Scheme()); err != nil {
		return err
	}
	if err := r.Client.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// dockerConfig is the registry credentials a builder gets: the push Secret's, with the pull
// Secret's added for registries the push Secret does not name, and, for the builders'
// registry when neither names it, a push credential for the output repository alone.
func (r *OSImageReconciler) dockerConfig(ctx context.Context, o *imagesv1alpha1.OSImage, in *inputs, now time.Time) ([]byte, error) {
	auths := map[string]json.RawMessage{}
	for _, ref := range []*computev1alpha1.LocalObjectReference{o.Spec.PushSecretRef, o.Spec.PullSecretRef} {
		if ref == nil {
			continue
		}
		name := ref.Name
		s := &corev1.Secret{}
		if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: name}, s); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, refuse(imagesv1alpha1.ReasonSecretMissing, "registry Secret %q does not exist", name)
			}
			return nil, err
		}
		var cfg struct {
			Auths map[string]json.RawMessage `json:"auths"`
		}
		if err := json.Unmarshal(s.Data[corev1.DockerConfigJsonKey], &cfg); err != nil {
			return nil, refuse(imagesv1alpha1.ReasonSecretMissing, "registry Secret %q: key %s is not a docker config: %v", name, corev1.DockerConfigJsonKey, err)
		}
		for host, auth := range cfg.Auths {
			// Builders reach the registry at its guest address: the credentials follow it.
			if host == r.Config.Registry {
				host = r.Config.GuestRegistry
			}
			if _, ok := auths[host]; !ok { // the push Secret's come first
				auths[host] = auth
			}
		}
	}
	if mint := r.Config.BuilderPush; mint != nil {
		if _, ok := auths[r.Config.GuestRegistry]; !ok {
			var reads []string
			if base, ok := strings.CutPrefix(in.guestBase, r.Config.GuestRegistry+"/"); ok {
				reads = []string{base}
			}
			p := mint(in.outputRepository, reads, builderPushExpiry(now, timeoutOf(o), ptrOr(o.Spec.Builder.Retries, 1)))
			auth := base64.StdEncoding.EncodeToString([]byte(p.Username + ":" + p.Password))
			auths[r.Config.GuestRegistry] = json.RawMessage(fmt.Sprintf(`{"auth":%q}`, auth))
		}
	}
	if len(auths) == 0 {
		return nil, nil
	}
	return json.Marshal(map[string]any{"auths": auths})
}
