package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	imagesv1alpha1 "github.com/anvil-dev/anvil/api/images/v1alpha1"
	"github.com/anvil-dev/anvil/internal/buildagent"
	"github.com/anvil-dev/anvil/internal/dev"
	"github.com/anvil-dev/anvil/internal/imagebuild"
	"github.com/anvil-dev/anvil/internal/runtime/qemu"
)

const (
	namespace = "default"
	class     = "bench-builder"
	name      = "bench-os"
	limit     = 10 * time.Minute
	poll      = 50 * time.Millisecond
)

var errTimeout = errors.New("timed out")

// bench changes one OSImage and runs its builders by hand.
type bench struct {
	c        client.Client
	registry string
	state    string // the pools' state folder (dev.StartQemuPool's): where consoles are read
	// index is the OSImage's published index before the current change.
	index string
}

func (b *bench) setup(ctx context.Context) error {
	mc := &computev1alpha1.MachineClass{ObjectMeta: metav1.ObjectMeta{Name: class},
		Capabilities: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}
	return b.c.Create(ctx, mc)
}

// change sets the OSImage's common steps to write marker (creating the OSImage the first
// time) and returns the seconds until its new index is published.
func (b *bench) change(ctx context.Context, marker string) (float64, error) {
	o := &imagesv1alpha1.OSImage{}
	err := b.c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, o)
	if client.IgnoreNotFound(err) != nil {
		return 0, err
	}
	o.Name, o.Namespace = name, namespace
	o.Spec = imagesv1alpha1.OSImageSpec{
		Base:           b.registry + "/" + dev.TestOSRepository,
		Architectures:  architectures,
		Containerfiles: []imagesv1alpha1.Containerfile{{Content: "RUN mkdir -p /etc/anvil && echo " + marker + " > /etc/anvil/round\n"}},
		Output:         imagesv1alpha1.OutputSpec{Repository: b.registry + "/" + namespace + "/bench-os", Tag: "1"},
		Builder: imagesv1alpha1.BuilderSpec{MachineClassRef: computev1alpha1.MachineClassReference{Name: class},
			AllowEmulated: true, Timeout: &metav1.Duration{Duration: 15 * time.Minute}},
	}
	start := time.Now()
	if err != nil {
		err = b.c.Create(ctx, o)
	} else {
		err = b.c.Update(ctx, o)
	}
	if err != nil {
		return 0, err
	}
	said := start
	for deadline := start.Add(limit); time.Now().Before(deadline); time.Sleep(poll) {
		if err := b.c.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			return 0, err
		}
		if time.Since(said) > 30*time.Second { // a slow round says where it is
			said = time.Now()
			if c := meta.FindStatusCondition(o.Status.Conditions, imagesv1alpha1.ConditionReady); c != nil {
				fmt.Fprintf(os.Stderr, "  after %s: Ready=%s %s: %s\n", time.Since(start).Round(time.Second), c.Status, c.Reason, c.Message)
			}
			build := &imagesv1alpha1.OSImageBuild{}
			if b.c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: o.Status.LatestBuild}, build) == nil {
				for _, a := range build.Status.Architectures {
					fmt.Fprintf(os.Stderr, "    %s: %s %s: %s %s\n", a.Architecture, a.Phase, a.Reason, a.Message, a.LogTail)
				}
			}
		}
		if o.Status.ObservedGeneration == o.Generation && meta.IsStatusConditionTrue(o.Status.Conditions, imagesv1alpha1.ConditionReady) &&
			o.Status.Index != "" && o.Status.Index != b.index {
			b.index = o.Status.Index
			return time.Since(start).Seconds(), nil
		}
	}
	return 0, fmt.Errorf("OSImage %s not published after %s: %+v: %w", name, limit, o.Status, errTimeout)
}

// byHand starts the latest build's builder for arch again as a Machine of its own (the
// same builder image and job, on the builders' network) and returns the seconds from its
// creation to the agent's result line. Its push finds the image already there.
func (b *bench) byHand(ctx context.Context, arch computev1alpha1.Architecture) (float64, error) {
	o := &imagesv1alpha1.OSImage{}
	if err := b.c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, o); err != nil {
		return 0, err
	}
	build := &imagesv1alpha1.OSImageBuild{}
	if err := b.c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: o.Status.LatestBuild}, build); err != nil {
		return 0, err
	}
	jobs := &corev1.Secret{}
	if err := b.c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: imagebuild.JobSecretName(build.Name)}, jobs); err != nil {
		return 0, err
	}
	var job buildagent.Job
	if err := json.Unmarshal(jobs.Data[string(arch)], &job); err != nil {
		return 0, err
	}
	var in imagesv1alpha1.ArchitectureInputs
	for _, a := range build.Spec.Architectures {
		if a.Architecture == arch {
			in = a
		}
	}
	job.LogTag = imagebuild.LogTag(string(arch), in.InputHash, 1)
	raw, err := json.Marshal(job)
	if err != nil {
		return 0, err
	}
	ign, err := buildagent.IgnitionConfig(raw)
	if err != nil {
		return 0, err
	}
	machine := "by-hand-" + string(arch) + "-" + build.Name
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: machine},
		Data: map[string][]byte{computev1alpha1.DefaultIgnitionKey: ign}}
	if err := b.c.Create(ctx, secret); err != nil {
		return 0, err
	}
	repository, _, _ := strings.Cut(dev.BuilderRepository, ":")
	// Marked as the manager marks its builders, so the pool lets it onto their network.
	m := &computev1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: machine, Labels: map[string]string{computev1alpha1.LabelImageBuilder: "true"}},
		Spec: computev1alpha1.MachineSpec{
			MachineClassRef: computev1alpha1.MachineClassReference{Name: class},
			Architecture:    arch,
			Image:           b.registry + "/" + repository + "@" + in.BuilderDigest,
			IgnitionRef:     &computev1alpha1.SecretKeySelector{Name: machine},
			NetworkInterfaces: []computev1alpha1.MachineNetworkInterface{{Name: "build",
				Ephemeral: &computev1alpha1.EphemeralNetworkInterfaceSource{NetworkInterfaceTemplate: computev1alpha1.NetworkInterfaceTemplate{
					Spec: computev1alpha1.NetworkInterfaceSpec{Network: dev.BuilderNetwork}}}}},
		}}
	start := time.Now()
	if err := b.c.Create(ctx, m); err != nil {
		return 0, err
	}
	took, err := b.untilResult(ctx, m, start)
	if derr := b.c.Delete(ctx, m); derr != nil {
		return 0, errors.Join(err, derr)
	}
	if derr := b.c.Delete(ctx, secret); derr != nil {
		return 0, errors.Join(err, derr)
	}
	return took, err
}

// untilResult waits for the Machine's console to show the agent's result line.
func (b *bench) untilResult(ctx context.Context, m *computev1alpha1.Machine, start time.Time) (float64, error) {
	for deadline := start.Add(limit); time.Now().Before(deadline); time.Sleep(poll) {
		if m.Status.MachineID == "" {
			if err := b.c.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
				return 0, err
			}
			continue
		}
		raw, _ := os.ReadFile(filepath.Join(dev.QemuMachineDir(b.state, m.Spec.Architecture, m.Status.MachineID), qemu.ConsoleLogFile))
		if strings.Contains(string(raw), buildagent.ResultLinePrefix) {
			return time.Since(start).Seconds(), nil
		}
	}
	return 0, fmt.Errorf("machine %s: no result line after %s: %w", m.Name, limit, errTimeout)
}
