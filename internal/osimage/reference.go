package osimage

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// plainHTTP holds registries, beyond loopback ones, spoken to over plain HTTP: set once at a
// process's start (AllowPlainHTTP), read everywhere after.
var plainHTTP sync.Map

// AllowPlainHTTP makes this process speak plain HTTP to the registry at host (host:port).
// The build agent needs it: its registry is a forward at an address of the guest's
// network, which is not loopback but is no further away.
func AllowPlainHTTP(host string) { plainHTTP.Store(host, true) }

// ParseReference parses an image reference; registries on loopback (the embedded one),
// and those allowed by AllowPlainHTTP, are spoken to over plain HTTP, all others over HTTPS.
// The registry is the one the parsed reference names: "localhost:5000" alone is a Docker Hub
// repository with a tag, not the registry on port 5000, and keeps HTTPS.
func ParseReference(reference string) (name.Reference, error) {
	ref, err := name.ParseReference(reference)
	if err != nil {
		return nil, fmt.Errorf("image reference %q: %w", reference, err)
	}
	registry := ref.Context().RegistryStr()
	if _, allowed := plainHTTP.Load(registry); !allowed && !loopback(registry) {
		return ref, nil
	}
	return name.ParseReference(reference, name.Insecure)
}

// loopback reports whether a registry (host[:port]) is on this machine.
func loopback(registry string) bool {
	host := registry
	if h, _, err := net.SplitHostPort(registry); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Push uploads the index and every image and blob under it, and returns the index's
// digest. A reference with a digest must name this index.
func Push(ctx context.Context, reference string, idx v1.ImageIndex) (digest string, err error) {
	ref, err := ParseReference(reference)
	if err != nil {
		return "", err
	}
	d, err := idx.Digest()
	if err != nil {
		return "", err
	}
	if pinned, ok := ref.(name.Digest); ok && pinned.DigestStr() != d.String() {
		return "", fmt.Errorf("reference %s names digest %s, the index is %s", reference, pinned.DigestStr(), d)
	}
	err = remote.WriteIndex(ref, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain))
	if err != nil {
		return "", fmt.Errorf("pushing %s: %w", reference, err)
	}
	return d.String(), nil
}

// PushImage uploads one image (its blobs, then its manifest under the reference's tag or
// digest) and returns its digest. The tag appears only once everything under it is there.
func PushImage(ctx context.Context, reference string, img v1.Image) (digest string, err error) {
	ref, err := ParseReference(reference)
	if err != nil {
		return "", err
	}
	d, err := img.Digest()
	if err != nil {
		return "", err
	}
	if err := remote.Write(ref, img, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return "", fmt.Errorf("pushing %s: %w", reference, err)
	}
	return d.String(), nil
}
