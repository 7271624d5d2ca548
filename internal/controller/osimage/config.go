package osimage

import (
	"fmt"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/anvil-dev/anvil/internal/imageowner"
	"github.com/anvil-dev/anvil/internal/osimage"
)

// Config is what both controllers need to know about builders.
type Config struct {
	// BuilderImage is the builder OS image index: an anvil OS image with the build agent
	// (anvil dev publishes the test OS with it).
	BuilderImage string
	// BuilderNetwork is the NIC network builder Machines join; the pools give that network
	// a forward to the registry, and nothing else.
	BuilderNetwork string
	// Registry is the registry builders reach (host:port, as the controllers name it);
	// GuestRegistry is where builders reach it on their network, over plain HTTP when
	// GuestPlainHTTP.
	Registry, GuestRegistry string
	GuestPlainHTTP          bool
	// SecretRecheck is how often an OSImage whose context reads a Secret reads it again
	// (DefaultSecretRecheck when zero). The manager holds no list or watch on Secrets (it
	// would read every Secret of the cluster), so a Secret's edit is found by looking.
	SecretRecheck time.Duration
	// BuilderPush, when set, mints the credential one build's builders push with: one
	// that writes to and reads only repository (the output's, as the registry names it:
	// no host) and reads only reads (the base's, when in this registry) until expires. The job Secret carrying it lives in the tenant's namespace, so it must
	// never be the registry's own push credential. It is not used when the OSImage's push
	// Secret names the registry itself. The controllers' own reads and writes (indexes,
	// tags) use the manager's keychain.
	BuilderPush func(repository string, reads []string, expires time.Time) authn.Basic
	// SharedFolders are folders of the registry, besides anvil/ and the builder image's,
	// that every namespace may use as a base and none may publish into
	// (imageowner.Folders.Shared): an admin's shared images.
	SharedFolders []string
	// PackageProxy is the HTTP proxy (host:port) builders reach on their network for
	// package downloads (apt), a site's mirror or proxy forwarded by the pools like the
	// registry; RUN steps get it as http_proxy. Empty: none, and a recipe whose RUN runs
	// apt is refused.
	PackageProxy string
}

// builderPushGrace is how long past its attempts' timeouts a build's push credential
// stays valid: the time its builders may wait for a pool.
const builderPushGrace = 24 * time.Hour

// BuilderPushMaxLifetime bounds a build's push credential, whatever its timeout and
// retries: it cannot be revoked, so it must not outlive its namespace for long (and write
// into a later namespace of the same name). A build whose attempts run longer fails its
// push.
const BuilderPushMaxLifetime = 48 * time.Hour

// builderPushExpiry is when the push credential of a build written at now expires: after
// every attempt could have run its whole timeout, and the grace, but never later than
// BuilderPushMaxLifetime from now.
func builderPushExpiry(now time.Time, timeout time.Duration, retries int32) time.Time {
	if timeout < 0 || retries < 0 {
		return now // an invalid spec (the API refuses it) gets nothing usable
	}
	attempts := time.Duration(retries) + 1
	// Compared by division: attempts × timeout may overflow.
	if timeout > 0 && attempts > (BuilderPushMaxLifetime-builderPushGrace)/timeout {
		return now.Add(BuilderPushMaxLifetime)
	}
	return now.Add(builderPushGrace + attempts*timeout)
}

// DefaultSecretRecheck is SecretRecheck when unset.
const DefaultSecretRecheck = time.Minute

func (c Config) secretRecheck() time.Duration {
	if c.SecretRecheck > 0 {
		return c.SecretRecheck
	}
	return DefaultSecretRecheck
}

// Validate says what to fix.
func (c Config) Validate() error {
	if c.BuilderImage == "" || c.BuilderNetwork == "" || c.Registry == "" || c.GuestRegistry == "" {
		return fmt.Errorf("image builds need a builder image, a builder network, and the registry's address for the controllers and for builders")
	}
	return nil
}

// folders is which repositories of the builders' registry a namespace may publish into and
// read: its own folder, and for reads the shared folders. The builder image's folder is
// anvil's, whatever namespaces exist.
func (c Config) folders() imageowner.Folders {
	shared := append([]string{imageowner.DefaultSharedFolder}, c.SharedFolders...)
	if builder, err := osimage.ParseReference(c.BuilderImage); err == nil {
		if own, _, found := strings.Cut(builder.Context().RepositoryStr(), "/"); found {
			shared = append(shared, own)
		}
	}
	return imageowner.Folders{Registry: c.Registry, Shared: shared}
}

// guestReference rewrites a reference of the builders' registry to the address builders
// reach it at; a reference to any other registry is refused, since builders reach nothing
// else.
func (c Config) guestReference(reference string) (string, error) {
	ref, err := osimage.ParseReference(reference)
	if err != nil {
		return "", err
	}
	if ref.Context().RegistryStr() != c.Registry {
		return "", fmt.Errorf("%s is not on %s, the only registry builders reach", reference, c.Registry)
	}
	return c.GuestRegistry + "/" + ref.Context().RepositoryStr(), nil
}
