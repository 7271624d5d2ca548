package buildagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/anvil-dev/anvil/internal/osimage"
)

// Media types of a build's log artifact.
const (
	MediaTypeResult types.MediaType = "application/vnd.anvil.build.log.v1+json"
	MediaTypeLog    types.MediaType = "text/plain; charset=utf-8"
)

// ResultLinePrefix starts the line the agent prints on the console when it ends.
const ResultLinePrefix = "ANVIL-BUILD-RESULT "

// Status is how an attempt ended.
type Status string

const (
	StatusSucceeded Status = "Succeeded"
	// StatusStepFailed: a step of the recipe failed; retrying would fail again.
	StatusStepFailed Status = "StepFailed"
	// StatusError: the attempt failed for a reason outside the recipe (registry, disk).
	StatusError Status = "Error"
)

// Result is how one attempt ended; the log artifact's annotations hold it.
type Result struct {
	Status Status `json:"status"`
	// Digest of the image pushed under the job's tag, when Succeeded.
	Digest string `json:"digest,omitempty"`
	// Message says what failed: the failing step's line and why.
	Message string `json:"message,omitempty"`
}

// Annotations of the log artifact's manifest that hold the Result.
const (
	AnnotationStatus  = "dev.anvil.build.status"
	AnnotationDigest  = "dev.anvil.build.digest"
	AnnotationMessage = "dev.anvil.build.message"
)

// pushLog pushes the attempt's log as an artifact under the job's log tag, its Result in
// the manifest's annotations; when the build succeeded its subject is the image, so the
// registry's referrers (or the OCI tag-schema fallback) list it beside the image.
func pushLog(ctx context.Context, job *Job, res Result, log []byte, subject *v1.Descriptor) error {
	img, err := mutate.Append(empty.Image, mutate.Addendum{Layer: static.NewLayer(log, MediaTypeLog)})
	if err != nil {
		return err
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, MediaTypeResult)
	annotations := map[string]string{AnnotationStatus: string(res.Status)}
	if res.Digest != "" {
		annotations[AnnotationDigest] = res.Digest
	}
	if res.Message != "" {
		annotations[AnnotationMessage] = res.Message
	}
	img = mutate.Annotations(img, annotations).(v1.Image)
	if subject != nil {
		img = mutate.Subject(img, *subject).(v1.Image)
	}
	_, err = osimage.PushImage(ctx, job.Output+":"+job.LogTag, img)
	return err
}

// ErrNoResult means the attempt's log artifact is not in the repository (yet).
var ErrNoResult = errors.New("no build result")

// ReadResult reads an attempt's result and the last lines of its log from repository:tag,
// with opts (the reader's credentials and transport; anonymous without them).
func ReadResult(ctx context.Context, repository, logTag string, tailLines int, opts ...remote.Option) (Result, string, error) {
	ref, err := osimage.ParseReference(repository + ":" + logTag)
	if err != nil {
		return Result{}, "", err
	}
	img, err := remote.Image(ref, append([]remote.Option{remote.WithContext(ctx)}, opts...)...)
	if err != nil {
		if errors.Is(osimage.RemoteError(logTag, err), osimage.ErrImageNotFound) {
			return Result{}, "", ErrNoResult
		}
		return Result{}, "", err
	}
	m, err := img.Manifest()
	if err != nil {
		return Result{}, "", err
	}
	res := Result{Status: Status(m.Annotations[AnnotationStatus]), Digest: m.Annotations[AnnotationDigest], Message: m.Annotations[AnnotationMessage]}
	if res.Status == "" {
		return Result{}, "", fmt.Errorf("build log %s: no %s annotation", logTag, AnnotationStatus)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		return res, "", fmt.Errorf("build log %s: want one layer (%v)", logTag, err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		return res, "", err
	}
	defer rc.Close()
	log, err := io.ReadAll(io.LimitReader(rc, 16<<20))
	if err != nil {
		return res, "", err
	}
	return res, Tail(string(log), tailLines), nil
}

// Tail returns the last n lines of s.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
