package buildagent

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/klauspost/compress/zstd"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/internal/registrynet"
)

// Run carries out a job in work (an empty folder it may fill), printing its log to console
// as it goes, and returns how it ended. It pushes the log artifact whatever the outcome; a
// Result that could not be pushed comes back with the push's error.
func Run(ctx context.Context, job *Job, work string, console io.Writer) (Result, error) {
	var log bytes.Buffer
	out := io.MultiWriter(&log, console)
	res, subject := build(ctx, job, work, out)
	if res.Status != StatusSucceeded {
		say(out, "build failed: %s", res.Message)
	}
	push := func() error { return pushLog(ctx, job, res, log.Bytes(), subject) }
	if err := registryRetry.do(ctx, console, "pushing the build log", push); err != nil {
		return res, fmt.Errorf("pushing the build log: %w", err)
	}
	return res, nil
}

// Configure applies a job's process-wide settings: plain-HTTP registries and credentials.
// agentStarted is when this process began: an agent carries out one build.
var agentStarted = time.Now()

// say writes one of the agent's own lines to the build log, after the time since the agent
// began, so that a reader sees where a build's minutes went (steps print as they like).
func say(log io.Writer, format string, args ...any) {
	fmt.Fprintf(log, "[%s] %s\n", time.Since(agentStarted).Round(time.Second), fmt.Sprintf(format, args...))
}

func Configure(job *Job, work string) error {
	for _, h := range job.PlainHTTP {
		osimage.AllowPlainHTTP(h)
	}
	if len(job.DockerConfig) == 0 {
		return nil
	}
	dir := filepath.Join(work, "docker")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), job.DockerConfig, 0o600); err != nil {
		return err
	}
	return os.Setenv("DOCKER_CONFIG", dir) // read by the default keychain
}

func build(ctx context.Context, job *Job, work string, log io.Writer) (Result, *v1.Descriptor) {
	fail := func(err error) (Result, *v1.Descriptor) {
		var step *StepError
		if errors.As(err, &step) {
			return Result{Status: StatusStepFailed, Message: step.Error()}, nil
		}
		return Result{Status: StatusError, Message: err.Error()}, nil
	}
	arch := computev1alpha1.Architecture(job.Architecture)
	say(log, "building %s from %s", job.Architecture, job.Base)
	// Any address: the agent runs in a builder guest, whose network reaches only the
	// registry forward it is given. The default keychain is the job's credentials
	// (Configure), the tenant's own.
	cache, err := osimage.NewCache(filepath.Join(work, "cache"), osimage.CacheOptions{Network: registrynet.Policy{AnyAddress: true}, Keychain: authn.DefaultKeychain})
	if err != nil {
		return fail(err)
	}
	var base osimage.Files
	err = registryRetry.do(ctx, log, "pulling the base", func() (err error) {
		base, err = cache.Pull(ctx, job.Base, "", arch)
		return err
	})
	if err != nil {
		return fail(fmt.Errorf("pulling the base: %w", err))
	}
	say(log, "pulled the base")
	var files osimage.Files
	switch {
	case base.Disk != "":
		files, err = buildOnDisk(ctx, job, base, work, log)
	case base.Initramfs != "":
		files, err = buildOnInitramfs(ctx, job, base, work, log)
	default:
		err = fmt.Errorf("the base's %s entry has neither a disk nor an initramfs: no root to build on", arch)
	}
	if err != nil {
		return fail(err)
	}
	files.Architecture, files.KernelCommandLine, files.Annotations = arch, base.KernelCommandLine, job.Program.Labels
	if job.KernelCommandLine != nil {
		files.KernelCommandLine = *job.KernelCommandLine
	}
	say(log, "pushing the image")
	img, err := osimage.Build(files)
	if err != nil {
		return fail(err)
	}
	var digest string
	err = registryRetry.do(ctx, log, "pushing the image", func() (err error) {
		digest, err = osimage.PushImage(ctx, job.Output+":"+job.Tag, img)
		return err
	})
	if err != nil {
		return fail(err)
	}
	say(log, "pushed %s:%s (%s)", job.Output, job.Tag, digest)
	desc, err := descriptor(img)
	if err != nil {
		return fail(err)
	}
	return Result{Status: StatusSucceeded, Digest: digest}, desc
}

// buildOnInitramfs runs the steps in the base's initramfs, unpacked, and packs it again.
func buildOnInitramfs(ctx context.Context, job *Job, base osimage.Files, work string, log io.Writer) (osimage.Files, error) {
	root := filepath.Join(work, "root")
	kind, err := unpackFile(base.Initramfs, root)
	if err != nil {
		return osimage.Files{}, fmt.Errorf("unpacking the base's initramfs: %w", err)
	}
	say(log, "unpacked the base's initramfs; running the steps")
	if err := execute(ctx, root, job.Program, job.Context, job.stepEnv(), log); err != nil {
		return osimage.Files{}, err
	}
	say(log, "packing the root")
	initramfs := filepath.Join(work, "initramfs")
	if err := packFile(root, initramfs, job.SourceDateEpoch, kind); err != nil {
		return osimage.Files{}, fmt.Errorf("packing the root: %w", err)
	}
	return osimage.Files{Kernel: base.Kernel, Initramfs: initramfs}, nil
}

func descriptor(img v1.Image) (*v1.Descriptor, error) {
	d, err := img.Digest()
	if err != nil {
		return nil, err
	}
	size, err := img.Size()
	if err != nil {
		return nil, err
	}
	mt, err := img.MediaType()
	if err != nil {
		return nil, err
	}
	return &v1.Descriptor{MediaType: mt, Digest: d, Size: size}, nil
}

// compression is how an initramfs is compressed.
type compression int

const (
	compressionNone compression = iota
	compressionGzip
	compressionZstd
)

// unpackFile extracts an initramfs, gzip- or zstd-compressed or not, into dir, and says
// which it was.
func unpackFile(path, dir string) (compression, error) {
	f, err := os.Open(path)
	if err != nil {
		return compressionNone, err
	}
	defer f.Close()
	br := bufio.NewReader(f)
	var r io.Reader = br
	kind := compressionNone
	if magic, err := br.Peek(2); err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return kind, err
		}
		defer zr.Close()
		r, kind = zr, compressionGzip
	} else if err == nil && bytes.Equal(magic, zstdMagic[:2]) {
		if m, err := br.Peek(4); err == nil && bytes.Equal(m, zstdMagic) {
			zr, err := zstd.NewReader(br)
			if err != nil {
				return kind, err
			}
			defer zr.Close()
			r, kind = zr, compressionZstd
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return kind, err
	}
	return kind, Unpack(r, dir)
}

// zstdMagic starts a zstd frame (Debian's initramfs-tools compress with zstd).
var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

// packFile writes dir as a newc archive at path: zstd-compressed when the base was (a
// whole distribution's root, as Debian's RAM form: on its 376 MB, gzip's best level takes
// over a minute of a native core, so many minutes of a TCG builder, where zstd takes
// seconds), gzip at its best level otherwise.
// Both encoders give the same bytes for the same tree.
func packFile(dir, path string, mtime int64, base compression) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if base == compressionZstd {
		// One encoder goroutine, so the frame does not depend on the machine.
		var zw *zstd.Encoder
		if zw, err = zstd.NewWriter(f, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedDefault)); err == nil {
			err = packInto(zw, dir, mtime)
		}
	} else {
		err = packGzip(f, dir, mtime, gzip.BestCompression)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// packGzip writes dir to w as a gzip-compressed newc archive. gzip's header carries no name
// or time, so the bytes depend on the tree alone.
func packGzip(w io.Writer, dir string, mtime int64, level int) error {
	zw, err := gzip.NewWriterLevel(w, level)
	if err != nil {
		return err
	}
	return packInto(zw, dir, mtime)
}

// packInto writes dir as a newc archive into a compressor, and closes it.
func packInto(zw io.WriteCloser, dir string, mtime int64) error {
	if err := Pack(zw, dir, mtime); err != nil {
		zw.Close()
		return err
	}
	return zw.Close()
}
