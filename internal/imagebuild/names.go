package imagebuild

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
)

// HashTag is the output repository's tag of one architecture's image built from inputs of
// this hash: finding it there means the architecture is built already.
func HashTag(arch, hash string) string {
	return "build-" + arch + "-" + hash
}

// LogTag is the output repository's tag of one attempt's build log.
func LogTag(arch, hash string, attempt int32) string {
	return fmt.Sprintf("log-%s-%s-%d", arch, hash, attempt)
}

// BuildName names the OSImageBuild of one set of per-architecture hashes: the OSImage's
// name and a short hash of the sorted "arch=hash" pairs, so the same inputs always name
// the same build. It fits a DNS label (63), as the builder Machines' names build on it.
func BuildName(osImage string, hashes map[string]string) string {
	archs := make([]string, 0, len(hashes))
	for a := range hashes {
		archs = append(archs, a)
	}
	sort.Strings(archs)
	h := sha256.New()
	for _, a := range archs {
		fmt.Fprintf(h, "%s=%s\n", a, hashes[a])
	}
	short := hex.EncodeToString(h.Sum(nil))[:10]
	return truncate(osImage, 63-len(short)-1-len("-ppc64le-99")) + "-" + short
}

// BuilderName names attempt n (from 1) of a build's builder Machine for arch.
func BuilderName(build, arch string, attempt int32) string {
	return fmt.Sprintf("%s-%s-%d", build, arch, attempt)
}

// JobSecretName names the Secret holding a build's jobs (steps, context, credentials).
func JobSecretName(build string) string {
	return build + "-job"
}

// truncate shortens a DNS name to n characters without leaving a '-' or '.' at its end.
func truncate(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return strings.TrimRight(s, "-.")
}
