package imageowner

import (
	"fmt"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/anvil-dev/anvil/internal/registrynet"
)

// DefaultSharedFolder is the folder every namespace reads and none publishes into unless an
// admin says otherwise: anvil's own images (anvil dev's builder and test OS).
const DefaultSharedFolder = "anvil"

// Folders is the rule for one registry.
type Folders struct {
	// Registry is the registry's address (host[:port]), for the messages.
	Registry string
	// Shared are folders ("anvil", "infra/os") every namespace reads and none publishes
	// into, a namespace of the same name included.
	Shared []string
}

// InNamespace reports whether repository (as the registry names it: no host) lies in
// namespace's folder. It is the one test of ownership, for outputs and reads alike.
func InNamespace(namespace, repository string) bool {
	return namespace != "" && strings.HasPrefix(repository, namespace+"/")
}

// sharedFolder is the shared folder repository lies in, or "".
func (f Folders) sharedFolder(repository string) string {
	for _, s := range f.Shared {
		if s = strings.Trim(s, "/"); s != "" && strings.HasPrefix(repository, s+"/") {
			return s
		}
	}
	return ""
}

// Publish says why namespace may not write repository (an OSImage's output), or nil.
func (f Folders) Publish(namespace, repository string) error {
	if !InNamespace(namespace, repository) {
		return fmt.Errorf("%s/%s is not under %s/%s/: a namespace publishes only under its own name", f.Registry, repository, f.Registry, namespace)
	}
	if s := f.sharedFolder(repository); s != "" {
		return fmt.Errorf("%s/%s is under %s/%s/, a shared folder, which only anvil's admins write", f.Registry, repository, f.Registry, s)
	}
	return nil
}

// Use says why namespace may not read repository (an OSImage's base, a Machine's image),
// or nil: it reads its own folder and the shared ones. The message says what to do and
// names no other namespace.
func (f Folders) Use(namespace, repository string) error {
	if InNamespace(namespace, repository) || f.sharedFolder(repository) != "" {
		return nil
	}
	var shared []string
	for _, s := range f.Shared {
		if s = strings.Trim(s, "/"); s != "" {
			shared = append(shared, f.Registry+"/"+s+"/")
		}
	}
	where := "no folder is shared"
	if len(shared) > 0 {
		where = strings.Join(shared, ", ")
	}
	return fmt.Errorf("%s/%s is neither under %s/%s/ (namespace %s's folder) nor under a shared folder (%s): push the image under %s/%s/, or ask an admin to share its folder",
		f.Registry, repository, f.Registry, namespace, namespace, where, f.Registry, namespace)
}

// UseImage is Use for an image reference (tag or digest) on any registry: nil for a
// reference to another registry, which this rule does not cover, and for a reference that
// does not parse, which its reader refuses.
func (f Folders) UseImage(namespace, reference string) error {
	ref, err := name.ParseReference(reference)
	if err != nil || ref.Context().RegistryStr() != f.Registry {
		return nil
	}
	return f.Use(namespace, ref.Context().RepositoryStr())
}

// ParseFolder checks a shared folder given by an admin ("anvil", "infra/os/") and returns
// it without slashes at its ends.
func ParseFolder(s string) (string, error) {
	folder := strings.Trim(s, "/")
	if _, err := name.NewRepository("example.invalid/"+folder+"/x", name.StrictValidation); err != nil || folder == "" || strings.Contains(folder, "//") {
		return "", fmt.Errorf("shared folder %q is not a repository path (such as anvil or infra/os)", s)
	}
	return folder, nil
}

// FoldersFor holds the registries a reader logs in to (its --registry-credentials: anvil's
// registry, with the pools' read credential) to namespaces: on them a Machine names only
// its namespace's folder and the shared folders (anvil/ and shared). A registry read
// anonymously anyone may read anyway; one read with the reader's own credential would
// otherwise hand every tenant's images to every other. The pools (before a pull) and the
// scheduler (before it reads an image's architectures) hold Machines to it.
func FoldersFor(logins map[string]registrynet.Login, shared []string) []Folders {
	hosts := make([]string, 0, len(logins))
	for h := range logins {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	folders := make([]Folders, 0, len(hosts))
	for _, h := range hosts {
		folders = append(folders, Folders{Registry: h, Shared: append([]string{DefaultSharedFolder}, shared...)})
	}
	return folders
}
