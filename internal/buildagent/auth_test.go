package buildagent

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	imagesv1alpha1 "github.com/anvil-dev/anvil/api/images/v1alpha1"
	"github.com/anvil-dev/anvil/internal/imagebuild"
	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/internal/registry"
	"github.com/anvil-dev/anvil/test/testos"
)

// A registry that takes writes only with its push credential and reads only with a
// credential (anvil dev's): a builder whose job carries the credential (as the controller
// gives it) pulls its base and pushes its image and log, which a reader with the pools'
// credential reads (the controller reads the result with its own) and nobody anonymously.
func TestRunPushesWithTheJobsCredential(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the build agent's test needs root (chroot and mounts, as in a builder)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	push := registry.Credential{Username: "anvil-push", Password: "s3cret"}
	read := registry.Credential{Username: "anvil-pools", Password: "r3ad"}
	reg, err := registry.Start(ctx, 0, "", &registry.Auth{Push: push, Read: &read})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Stop() })
	config := []byte(`{"auths":{"` + reg.Host + `":{"auth":"` + base64.StdEncoding.EncodeToString([]byte(push.Username+":"+push.Password)) + `"}}}`)

	// Publishing the base needs the credential too; Configure sets it process-wide.
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	job := &Job{DockerConfig: config}
	if err := Configure(job, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	base, _, err := osimage.PushDirs(ctx, reg.Host+"/anvil/testos:1", map[computev1alpha1.Architecture]string{
		computev1alpha1.ArchitectureAMD64: filepath.Join(testos.Dir(t), "amd64"),
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := imagebuild.Recipe{Containerfiles: []imagesv1alpha1.Containerfile{{Content: "RUN echo built > /etc/built\n"}}}.
		ForArchitecture("amd64", "sha256:base", "sha256:builder")
	if err != nil {
		t.Fatal(err)
	}
	hash := plan.Inputs.Hash()
	job = &Job{Architecture: "amd64", Base: base, Output: reg.Host + "/team/os", Tag: imagebuild.HashTag("amd64", hash),
		LogTag: "log-amd64-" + hash[:12] + "-1", Program: plan.Program, SourceDateEpoch: 1700000000, DockerConfig: config}
	var console bytes.Buffer
	res, err := Run(ctx, job, t.TempDir(), &console)
	if err != nil || res.Status != StatusSucceeded {
		t.Fatalf("Run() = %+v, %v\nconsole:\n%s", res, err, console.String())
	}
	// The pools' credential reads what it pushed, and its result; nobody reads anonymously.
	ref, err := osimage.ParseReference(job.Output + ":" + job.Tag)
	if err != nil {
		t.Fatal(err)
	}
	reader := remote.WithAuth(&authn.Basic{Username: read.Username, Password: read.Password})
	if _, err := remote.Head(ref, reader); err != nil {
		t.Fatalf("the pushed image: %v", err)
	}
	if got, _, err := ReadResult(ctx, job.Output, job.LogTag, 3, reader); err != nil || got.Status != StatusSucceeded {
		t.Fatalf("ReadResult with a reader's credential = %+v, %v; want Succeeded", got, err)
	}
	if _, _, err := ReadResult(ctx, job.Output, job.LogTag, 3, remote.WithAuth(authn.Anonymous)); err == nil || errors.Is(err, ErrNoResult) {
		t.Fatalf("ReadResult anonymously = %v, want the registry's refusal (not \"no result\", which would leave a build waiting)", err)
	}
}
