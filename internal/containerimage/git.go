package containerimage

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// GitRoot is the top folder of the git checkout the process runs in.
func GitRoot(ctx context.Context) (string, error) {
	return gitOutput(ctx, "", "rev-parse", "--show-toplevel")
}

// GitSource is the Source of the checkout at dir, whose images url names: its HEAD, the
// commit's time (SOURCE_DATE_EPOCH overrides it) and version, or when version is empty
// `git describe --tags --always --dirty`.
func GitSource(ctx context.Context, dir, url, version string) (Source, error) {
	s := Source{URL: url, Version: version}
	var err error
	if s.Revision, err = gitOutput(ctx, dir, "rev-parse", "HEAD"); err != nil {
		return s, err
	}
	if s.Version == "" {
		if s.Version, err = gitOutput(ctx, dir, "describe", "--tags", "--always", "--dirty"); err != nil {
			return s, err
		}
	}
	epoch := os.Getenv("SOURCE_DATE_EPOCH")
	if epoch == "" {
		if epoch, err = gitOutput(ctx, dir, "log", "-1", "--format=%ct"); err != nil {
			return s, err
		}
	}
	sec, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return s, fmt.Errorf("source date %q: %w", epoch, err)
	}
	s.Created = time.Unix(sec, 0).UTC()
	return s, nil
}

func gitOutput(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}
