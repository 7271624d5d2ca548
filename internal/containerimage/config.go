package containerimage

import (
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// OCI annotation keys (image-spec annotations.md), used as config labels and as index
// annotations.
const (
	LabelSource   = "org.opencontainers.image.source"
	LabelRevision = "org.opencontainers.image.revision"
	LabelVersion  = "org.opencontainers.image.version"
	LabelTitle    = "org.opencontainers.image.title"
	LabelCreated  = "org.opencontainers.image.created"
)

// Source says where an image's contents come from. Created is the source's commit time,
// never the build's wall-clock time, so a rebuild of one commit gives the same digests.
type Source struct {
	URL      string
	Revision string
	Version  string
	Created  time.Time
}

// Labels are the OCI labels of an image titled title built from s; empty values are left out.
func (s Source) Labels(title string) map[string]string {
	l := map[string]string{}
	for k, v := range map[string]string{
		LabelSource: s.URL, LabelRevision: s.Revision, LabelVersion: s.Version, LabelTitle: title,
	} {
		if v != "" {
			l[k] = v
		}
	}
	if !s.Created.IsZero() {
		l[LabelCreated] = s.Created.UTC().Format(time.RFC3339)
	}
	return l
}

// PathEnv is the usual PATH of a Linux image, as an Env entry: programs in the usual places.
const PathEnv = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Role is how one image runs: what it is called and whom it runs as.
type Role struct {
	// Title is the image's name (org.opencontainers.image.title).
	Title      string
	Entrypoint []string
	// User is "uid:gid" (or a name in the image's /etc/passwd).
	User string
	Env  []string
}

// ConfigFile is the image config of role on linux/arch, without its root filesystem
// (the layers added later fill it in).
func ConfigFile(role Role, arch string, src Source) v1.ConfigFile {
	return v1.ConfigFile{
		Architecture: arch,
		OS:           "linux",
		Created:      v1.Time{Time: src.Created.UTC()},
		Config: v1.Config{
			Entrypoint: role.Entrypoint,
			User:       role.User,
			Env:        role.Env,
			WorkingDir: "/",
			Labels:     src.Labels(role.Title),
		},
		RootFS: v1.RootFS{Type: "layers"},
	}
}
