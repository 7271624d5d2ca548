package osimage

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	imagesv1alpha1 "github.com/anvil-dev/anvil/api/images/v1alpha1"
	"github.com/anvil-dev/anvil/internal/buildagent"
	"github.com/anvil-dev/anvil/internal/imagebuild"
	"github.com/anvil-dev/anvil/internal/osimage"
)

// defaultTimeout is an attempt's limit when the OSImage names none.
const defaultTimeout = 30 * time.Minute

// createBuilder creates attempt n's builder Machine for one architecture, with its first-boot
// Secret (the job, with this attempt's log tag). Both already existing is success.
func (r *BuildReconciler) createBuilder(ctx context.Context, o *imagesv1alpha1.OSImage, b *imagesv1alpha1.OSImageBuild, in imagesv1alpha1.ArchitectureInputs, n int32) error {
	arch := string(in.Architecture)
	name := imagebuild.BuilderName(b.Name, arch, n)
	jobs := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: imagebuild.JobSecretName(b.Name)}, jobs); err != nil {
		return fmt.Errorf("%s: the build's job Secret: %w", arch, err) // written with the build; retried until it is there
	}
	var job buildagent.Job
	if err := json.Unmarshal(jobs.Data[arch], &job); err != nil {
		return fmt.Errorf("%s: the build's job: %w", arch, err)
	}
	job.LogTag = imagebuild.LogTag(arch, in.InputHash, n)
	raw, err := json.Marshal(job)
	if err != nil {
		return err
	}
	ign, err := buildagent.IgnitionConfig(raw)
	if err != nil {
		return err
	}
	labels := map[string]string{
		imagesv1alpha1.LabelOSImage: o.Name, imagesv1alpha1.LabelBuild: b.Name,
		imagesv1alpha1.LabelArchitecture: arch, imagesv1alpha1.LabelAttempt: strconv.Itoa(int(n)),
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: b.Namespace, Labels: labels},
		Data:       map[string][]byte{computev1alpha1.DefaultIgnitionKey: ign},
	}
	if err := controllerutil.SetControllerReference(b, secret, r.Client.Scheme()); err != nil {
		return err
	}
	if err := r.Client.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	builderRef, err := osimage.ParseReference(r.Config.BuilderImage)
	if err != nil {
		return err
	}
	emulation := computev1alpha1.EmulationForbidden
	if o.Spec.Builder.AllowEmulated {
		emulation = computev1alpha1.EmulationAllowed
	}
	// The marker lets pools put it on the builders' network; only the manager may set it
	// (admission policy anvil-image-builder-marker).
	machineLabels := map[string]string{computev1alpha1.LabelImageBuilder: "true"}
	for k, v := range labels {
		machineLabels[k] = v
	}
	m := &computev1alpha1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: b.Namespace, Labels: machineLabels},
		Spec: computev1alpha1.MachineSpec{
			MachineClassRef:     o.Spec.Builder.MachineClassRef,
			Image:               builderRef.Context().Digest(in.BuilderDigest).String(),
			Architecture:        in.Architecture,
			Emulation:           emulation,
			MachinePoolSelector: o.Spec.Builder.MachinePoolSelector,
			Tolerations:         o.Spec.Builder.Tolerations,
			Power:               computev1alpha1.PowerOn,
			IgnitionRef:         &computev1alpha1.SecretKeySelector{Name: name, Key: computev1alpha1.DefaultIgnitionKey},
			NetworkInterfaces: []computev1alpha1.MachineNetworkInterface{{
				Name: "build",
				Ephemeral: &computev1alpha1.EphemeralNetworkInterfaceSource{NetworkInterfaceTemplate: computev1alpha1.NetworkInterfaceTemplate{
					Spec: computev1alpha1.NetworkInterfaceSpec{Network: r.Config.BuilderNetwork},
				}},
			}},
		},
	}
	if job.RootDiskBytes > 0 {
		// A base with a disk root: the agent writes it onto this blank disk and builds there.
		m.Spec.Volumes = []computev1alpha1.MachineVolume{{Name: "root", EmptyDisk: &computev1alpha1.EmptyDiskSource{
			Size: *resource.NewQuantity(job.RootDiskBytes, resource.BinarySI)}}}
	}
	if err := controllerutil.SetControllerReference(b, m, r.Client.Scheme()); err != nil {
		return err
	}
	if err := r.Client.Create(ctx, m); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}
	r.Events.NormalAbout(b, m, "BuilderCreated", "CreateBuilder", "%s attempt %d: builder Machine %s", arch, n, name)
	return nil
}

func timeoutOf(o *imagesv1alpha1.OSImage) time.Duration {
	if o.Spec.Builder.Timeout == nil {
		return defaultTimeout
	}
	return o.Spec.Builder.Timeout.Duration
}
