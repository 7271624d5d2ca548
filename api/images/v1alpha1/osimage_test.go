package v1alpha1_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	imagesv1alpha1 "github.com/anvil-dev/anvil/api/images/v1alpha1"
	"github.com/anvil-dev/anvil/test/harness"
)

var env *harness.Env

func TestMain(m *testing.M) { harness.Main(m, &env) }

func validOSImage(name string) *imagesv1alpha1.OSImage {
	return &imagesv1alpha1.OSImage{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: imagesv1alpha1.OSImageSpec{
			Base:           "registry.example/anvil/testos:1",
			Containerfiles: []imagesv1alpha1.Containerfile{{Content: "RUN true\n"}},
			Context: []imagesv1alpha1.ContextFile{
				{Path: "etc/motd", ConfigMapKeyRef: &imagesv1alpha1.KeyReference{Name: "files", Key: "motd"}},
				{Path: "..hidden/x.conf", SecretKeyRef: &imagesv1alpha1.KeyReference{Name: "secret-files", Key: "x"}},
			},
			Output:  imagesv1alpha1.OutputSpec{Repository: "registry.example/team/os", Tag: "latest"},
			Builder: imagesv1alpha1.BuilderSpec{MachineClassRef: computev1alpha1.MachineClassReference{Name: "builder"}},
		},
	}
}

func TestOSImageDefaults(t *testing.T) {
	ctx := context.Background()
	o := validOSImage("defaults")
	if err := env.Client.Create(ctx, o); err != nil {
		t.Fatalf("creating a valid OSImage: %v", err)
	}
	got := &imagesv1alpha1.OSImage{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(o), got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Publish != imagesv1alpha1.PublishAllArchitectures {
		t.Errorf("publish = %q, want the default AllArchitectures", got.Spec.Publish)
	}
	if got.Spec.Builder.Retries == nil || *got.Spec.Builder.Retries != 1 || got.Spec.Builder.Timeout == nil || got.Spec.Builder.Timeout.Duration.Minutes() != 30 {
		t.Errorf("builder = %+v, want retries 1 and timeout 30m by default", got.Spec.Builder)
	}
}

func TestOSImageRejectsInvalid(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mutate  func(*imagesv1alpha1.OSImage)
		message string
	}{
		{"two files for every architecture", func(o *imagesv1alpha1.OSImage) {
			o.Spec.Containerfiles = append(o.Spec.Containerfiles, imagesv1alpha1.Containerfile{Content: "RUN false\n"})
		}, "at most one entry for all architectures and one per architecture"},
		{"two files for arm64", func(o *imagesv1alpha1.OSImage) {
			o.Spec.Containerfiles = append(o.Spec.Containerfiles,
				imagesv1alpha1.Containerfile{Architecture: "arm64", Content: "RUN a\n"},
				imagesv1alpha1.Containerfile{Architecture: "arm64", Content: "RUN b\n"})
		}, "at most one entry for all architectures and one per architecture"},
		{"unknown architecture", func(o *imagesv1alpha1.OSImage) {
			o.Spec.Architectures = []computev1alpha1.Architecture{"x86_64"}
		}, `Unsupported value: "x86_64"`},
		{"unknown containerfile architecture", func(o *imagesv1alpha1.OSImage) {
			o.Spec.Containerfiles[0].Architecture = "aarch64"
		}, `Unsupported value: "aarch64"`},
		{"context path escaping", func(o *imagesv1alpha1.OSImage) {
			o.Spec.Context = []imagesv1alpha1.ContextFile{{Path: "../etc/x", ConfigMapKeyRef: &imagesv1alpha1.KeyReference{Name: "c", Key: "k"}}}
		}, "spec.context[0].path"},
		{"context path absolute", func(o *imagesv1alpha1.OSImage) {
			o.Spec.Context = []imagesv1alpha1.ContextFile{{Path: "/etc/x", ConfigMapKeyRef: &imagesv1alpha1.KeyReference{Name: "c", Key: "k"}}}
		}, "spec.context[0].path"},
		{"context path with an empty element", func(o *imagesv1alpha1.OSImage) {
			o.Spec.Context = []imagesv1alpha1.ContextFile{{Path: "a//b", ConfigMapKeyRef: &imagesv1alpha1.KeyReference{Name: "c", Key: "k"}}}
		}, "spec.context[0].path"},
		{"context path with a dot element", func(o *imagesv1alpha1.OSImage) {
			o.Spec.Context = []imagesv1alpha1.ContextFile{{Path: "a/./b", ConfigMapKeyRef: &imagesv1alpha1.KeyReference{Name: "c", Key: "k"}}}
		}, "spec.context[0].path"},
		{"context with two sources", func(o *imagesv1alpha1.OSImage) {
			ref := &imagesv1alpha1.KeyReference{Name: "c", Key: "k"}
			o.Spec.Context = []imagesv1alpha1.ContextFile{{Path: "x", ConfigMapKeyRef: ref, SecretKeyRef: ref}}
		}, "each context file sets exactly one of configMapKeyRef or secretKeyRef"},
		{"output with a tag in the repository", func(o *imagesv1alpha1.OSImage) {
			o.Spec.Output.Repository = "registry.example:5000/team/os:1"
		}, "output.repository names a repository without a tag or digest"},
		{"bad tag", func(o *imagesv1alpha1.OSImage) { o.Spec.Output.Tag = "-x" }, "spec.output.tag"},
		{"unknown publish policy", func(o *imagesv1alpha1.OSImage) { o.Spec.Publish = "Sometimes" }, `Unsupported value: "Sometimes"`},
		{"a timeout of 1000h", func(o *imagesv1alpha1.OSImage) {
			o.Spec.Builder.Timeout = &metav1.Duration{Duration: 1000 * time.Hour}
		}, "builder.timeout: at most 6h per attempt"},
		{"a timeout just over 6h", func(o *imagesv1alpha1.OSImage) {
			o.Spec.Builder.Timeout = &metav1.Duration{Duration: 6*time.Hour + time.Second}
		}, "give a shorter timeout such as 2h"},
		{"too many retries", func(o *imagesv1alpha1.OSImage) { n := int32(11); o.Spec.Builder.Retries = &n }, "spec.builder.retries"},
		{"maxUnavailable 0", rollout(intstr.FromInt32(0)), "maxUnavailable: a count must be at least 1"},
		{"maxUnavailable negative", rollout(intstr.FromInt32(-2)), "maxUnavailable: a count must be at least 1"},
		{"maxUnavailable 0%", rollout(intstr.FromString("0%")), "maxUnavailable: a percentage must be from 1% to 100%"},
		{"maxUnavailable over 100%", rollout(intstr.FromString("101%")), "maxUnavailable: a percentage must be from 1% to 100%"},
		{"maxUnavailable a word", rollout(intstr.FromString("ten")), `maxUnavailable: a string must be a whole percentage such as "10%"`},
		{"maxUnavailable a count in quotes", rollout(intstr.FromString("3")), `maxUnavailable: a string must be a whole percentage such as "10%"`},
		{"maxUnavailable a fraction", rollout(intstr.FromString("2.5%")), `maxUnavailable: a string must be a whole percentage such as "10%"`},
		{"progress deadline 0", func(o *imagesv1alpha1.OSImage) {
			o.Spec.Rollout = &imagesv1alpha1.RolloutSpec{ProgressDeadlineSeconds: ptr.To[int32](0)}
		}, "spec.rollout.progressDeadlineSeconds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := validOSImage("invalid")
			tc.mutate(o)
			err := env.Client.Create(context.Background(), o)
			if !apierrors.IsInvalid(err) {
				t.Fatalf("create returned %v, want an Invalid error", err)
			}
			if !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("error %q does not say %q", err.Error(), tc.message)
			}
		})
	}
}

func rollout(max intstr.IntOrString) func(*imagesv1alpha1.OSImage) {
	return func(o *imagesv1alpha1.OSImage) { o.Spec.Rollout = &imagesv1alpha1.RolloutSpec{MaxUnavailable: &max} }
}

// The rollout's defaults, and the forms of maxUnavailable it takes.
func TestOSImageRolloutDefaultsAndValidForms(t *testing.T) {
	ctx := context.Background()
	o := validOSImage("rollout-defaults")
	o.Spec.Rollout = &imagesv1alpha1.RolloutSpec{}
	if err := env.Client.Create(ctx, o); err != nil {
		t.Fatal(err)
	}
	if r := o.Spec.Rollout; r.MaxUnavailable == nil || r.MaxUnavailable.String() != "1" || r.ProgressDeadlineSeconds == nil || *r.ProgressDeadlineSeconds != 600 {
		t.Errorf("rollout = %+v, want maxUnavailable 1 and progressDeadlineSeconds 600 by default", r)
	}
	for i, v := range []intstr.IntOrString{intstr.FromInt32(1), intstr.FromInt32(50), intstr.FromString("1%"), intstr.FromString("10%"), intstr.FromString("100%")} {
		o := validOSImage(fmt.Sprint("rollout-valid-", i))
		rollout(v)(o)
		if err := env.Client.Create(ctx, o); err != nil {
			t.Errorf("maxUnavailable %s refused: %v", v.String(), err)
		}
	}
}

func TestOSImageBuildSpecIsImmutable(t *testing.T) {
	ctx := context.Background()
	b := &imagesv1alpha1.OSImageBuild{
		ObjectMeta: metav1.ObjectMeta{Name: "os-0123456789", Namespace: "default"},
		Spec: imagesv1alpha1.OSImageBuildSpec{
			OSImage: "os", Base: "registry.example/anvil/testos@sha256:" + strings.Repeat("0", 64),
			Output: imagesv1alpha1.OutputSpec{Repository: "registry.example/team/os", Tag: "latest"},
			Architectures: []imagesv1alpha1.ArchitectureInputs{{
				Architecture: "amd64", InputHash: strings.Repeat("a", 64), BaseDigest: "sha256:b", BuilderDigest: "sha256:c",
			}},
		},
	}
	if err := env.Client.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	b.Spec.Architectures[0].InputHash = strings.Repeat("b", 64)
	err := env.Client.Update(ctx, b)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "an OSImageBuild records one set of inputs and cannot change") {
		t.Fatalf("update returned %v, want the immutability message", err)
	}
}

// The longest timeout the API takes is 6h.
func TestOSImageTakesATimeoutOf6h(t *testing.T) {
	o := validOSImage("six-hours")
	o.Spec.Builder.Timeout = &metav1.Duration{Duration: 6 * time.Hour}
	if err := env.Client.Create(context.Background(), o); err != nil {
		t.Fatalf("creating an OSImage with a 6h timeout: %v", err)
	}
}
