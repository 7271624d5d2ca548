package buildagent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	imagesv1alpha1 "github.com/anvil-dev/anvil/api/images/v1alpha1"
	"github.com/anvil-dev/anvil/internal/imagebuild"
	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/internal/registry"
	"github.com/anvil-dev/anvil/internal/registrynet"
	"github.com/anvil-dev/anvil/test/testos"
)

// The agent on this machine's own architecture (amd64), as a builder runs it, against the
// embedded registry with the test OS as the base: the RUN steps really run in a chroot of
// the base's root with its busybox.

type fixture struct {
	reg  *registry.Registry
	base string // the test OS index, by digest
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the build agent's test needs root (chroot and mounts, as in a builder)")
	}
	ctx := context.Background()
	reg, err := registry.Start(ctx, 0, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Stop() })
	dir := testos.Dir(t)
	pinned, _, err := osimage.PushDirs(ctx, reg.Host+"/anvil/testos:1", map[computev1alpha1.Architecture]string{
		computev1alpha1.ArchitectureAMD64: filepath.Join(dir, "amd64"),
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{reg: reg, base: pinned}
}

// job plans recipe for amd64 the way the controller does and returns the builder's job.
func (f *fixture) job(t *testing.T, recipe imagebuild.Recipe, context map[string][]byte, attempt string) *Job {
	t.Helper()
	plan, err := recipe.ForArchitecture("amd64", "sha256:base", "sha256:builder")
	if err != nil {
		t.Fatal(err)
	}
	hash := plan.Inputs.Hash()
	return &Job{
		Architecture: "amd64", Base: f.base, Output: f.reg.Host + "/team/os",
		Tag: imagebuild.HashTag("amd64", hash), LogTag: "log-amd64-" + hash[:12] + "-" + attempt,
		Program: plan.Program, Context: context, SourceDateEpoch: 1700000000,
	}
}

// runAndPull runs job, which must succeed, and pulls the image it pushed.
func runAndPull(ctx context.Context, t *testing.T, job *Job) (Result, osimage.Files) {
	t.Helper()
	var console bytes.Buffer
	res, err := Run(ctx, job, t.TempDir(), &console)
	if err != nil || res.Status != StatusSucceeded {
		t.Fatalf("Run() = %+v, %v\nconsole:\n%s", res, err, console.String())
	}
	cache, err := osimage.NewCache(t.TempDir(), osimage.CacheOptions{Network: registrynet.Policy{Allow: registrynet.Loopback}})
	if err != nil {
		t.Fatal(err)
	}
	files, err := cache.Pull(ctx, job.Output+":"+job.Tag, "", computev1alpha1.ArchitectureAMD64)
	if err != nil {
		t.Fatal(err)
	}
	return res, files
}

func TestRunBuildsPushesAndIsReproducible(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	motd := []byte("built by anvil\n")
	recipe := imagebuild.Recipe{
		Containerfiles: []imagesv1alpha1.Containerfile{{Content: `ARG TARGETARCH
LABEL org.opencontainers.image.title="test os" arch=$TARGETARCH
RUN mkdir -p /etc/anvil && echo "built-on=$(uname -m)" > /etc/anvil/build
WORKDIR /srv
RUN ["/bin/sh", "-c", "pwd > where"]
COPY motd /etc/motd
`}},
		Context: map[string]string{"motd": imagebuild.ContentDigest(motd)},
	}
	job := f.job(t, recipe, map[string][]byte{"motd": motd}, "1")

	// The image under its hash tag holds the steps' results, and the labels.
	res, files := runAndPull(ctx, t, job)
	root := t.TempDir()
	if _, err := unpackFile(files.Initramfs, root); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{"etc/anvil/build": "built-on=x86_64\n", "srv/where": "/srv\n", "etc/motd": string(motd)} {
		got, err := os.ReadFile(filepath.Join(root, path))
		if err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", path, got, err, want)
		}
	}
	if entries, _ := os.ReadDir(filepath.Join(root, "proc")); len(entries) != 0 {
		t.Errorf("the packed root's /proc holds %d entries: RUN's mounts were packed", len(entries))
	}
	got, tail, err := ReadResult(ctx, job.Output, job.LogTag, 5)
	if err != nil || got.Status != StatusSucceeded || got.Digest != res.Digest {
		t.Fatalf("ReadResult() = %+v, %v; want Succeeded with %s", got, err, res.Digest)
	}
	if !strings.Contains(tail, "pushed "+job.Output+":"+job.Tag) {
		t.Errorf("log tail does not say what was pushed:\n%s", tail)
	}

	// The same job again gives the same image, byte for byte.
	again, err := Run(ctx, f.job(t, recipe, map[string][]byte{"motd": motd}, "2"), t.TempDir(), &bytes.Buffer{})
	if err != nil || again.Digest != res.Digest {
		t.Fatalf("second build = %+v, %v; want the same digest %s", again, err, res.Digest)
	}
}

func TestRunReportsTheFailingStepAndPushesNoImage(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	recipe := imagebuild.Recipe{Containerfiles: []imagesv1alpha1.Containerfile{{Content: "RUN echo before\nRUN echo about to fail && exit 3\nRUN echo never\n"}}}
	job := f.job(t, recipe, nil, "1")
	var console bytes.Buffer
	res, err := Run(ctx, job, t.TempDir(), &console)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != StatusStepFailed || !strings.Contains(res.Message, "line 2: RUN echo about to fail && exit 3: exited with status 3") {
		t.Fatalf("Run() = %+v, want StepFailed naming line 2", res)
	}
	if strings.Contains(console.String(), "never") {
		t.Error("a step after the failing one ran")
	}
	got, tail, err := ReadResult(ctx, job.Output, job.LogTag, 3)
	if err != nil || got.Status != StatusStepFailed {
		t.Fatalf("ReadResult() = %+v, %v", got, err)
	}
	if !strings.Contains(tail, "about to fail") {
		t.Errorf("the log tail lacks the step's output:\n%s", tail)
	}
	cache, err := osimage.NewCache(t.TempDir(), osimage.CacheOptions{Network: registrynet.Policy{Allow: registrynet.Loopback}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cache.Entry(ctx, job.Output+":"+job.Tag, "", computev1alpha1.ArchitectureAMD64); !errors.Is(err, osimage.ErrImageNotFound) {
		t.Fatalf("the hash tag after a failed build: %v, want not found", err)
	}
	if _, _, err := ReadResult(ctx, job.Output, "log-amd64-none-1", 3); !errors.Is(err, ErrNoResult) {
		t.Fatalf("ReadResult of an attempt that pushed nothing = %v, want ErrNoResult", err)
	}
}

// A registry that is away when the build pushes (anvil dev restarting) is waited for: the
// attempt is not lost. Away is either nothing listening, or, as a builder sees it through
// its guest forward, a connection accepted and closed unanswered.
func TestRunWaitsForARegistryThatIsAway(t *testing.T) {
	f := newFixture(t)
	for _, away := range []string{"refused", "closed unanswered"} {
		t.Run(away, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			port := l.Addr().(*net.TCPAddr).Port
			back := make(chan string, 1) // the registry's address, once it is back
			if away == "refused" {
				_ = l.Close()
			} else {
				t.Cleanup(func() { _ = l.Close() })
				go forwardWhenBack(l, back)
			}
			job := f.job(t, imagebuild.Recipe{Containerfiles: []imagesv1alpha1.Containerfile{{Content: "RUN echo hi > /hi\n"}}}, nil, "1")
			job.Output = fmt.Sprintf("127.0.0.1:%d/team/os", port)

			console := &testos.SyncBuffer{}
			type ended struct {
				res Result
				err error
			}
			done := make(chan ended, 1)
			go func() {
				res, err := Run(ctx, job, t.TempDir(), console)
				done <- ended{res, err}
			}()
			for !strings.Contains(console.String(), "retrying in") { // the registry comes back only once it was missed
				select {
				case got := <-done:
					t.Fatalf("Run() ended before it retried: %+v, %v\n%s", got.res, got.err, console.String())
				case <-time.After(100 * time.Millisecond):
				}
			}
			listen := port
			if away != "refused" {
				listen = 0
			}
			reg, err := registry.Start(ctx, listen, "", nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = reg.Stop() })
			back <- reg.Host
			got := <-done
			if got.err != nil || got.res.Status != StatusSucceeded {
				t.Fatalf("Run() = %+v, %v\nconsole:\n%s", got.res, got.err, console.String())
			}
			if !strings.Contains(console.String(), "pushing the image: ") || !strings.Contains(console.String(), "retrying in") {
				t.Errorf("the console does not say the push was retried:\n%s", console.String())
			}
			if res, _, err := ReadResult(ctx, job.Output, job.LogTag, 1); err != nil || res.Digest != got.res.Digest {
				t.Errorf("ReadResult() = %+v, %v; want the pushed digest %s", res, err, got.res.Digest)
			}
		})
	}
}

// forwardWhenBack is a guest forward in front of a registry: until the registry's address
// arrives on back, it accepts each connection and closes it unanswered; then it joins each
// connection to the registry.
func forwardWhenBack(l net.Listener, back <-chan string) {
	target := ""
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		select {
		case target = <-back:
		default:
		}
		if target == "" {
			_ = c.Close()
			continue
		}
		go func() {
			defer c.Close()
			r, err := net.Dial("tcp", target)
			if err != nil {
				return
			}
			defer r.Close()
			go func() { _, _ = io.Copy(r, c) }()
			_, _ = io.Copy(c, r)
		}()
	}
}
