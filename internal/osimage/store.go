package osimage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// tempPrefix starts the name of a blob being written. A blob's own name is 64 hex digits,
// so a file left by a crash can never be taken for one.
const tempPrefix = ".partial-"

// store is a folder of blobs named by their sha256 digest: <dir>/blobs/sha256/<hex>. A blob
// appears only once its bytes matched its digest, through a rename, so readers never see
// half a file.
type store struct {
	dir   string // <root>/blobs/sha256
	locks keyedMutex
}

func openStore(root string) (*store, error) {
	dir := filepath.Join(root, "blobs", "sha256")
	if err := makeCacheDir(dir); err != nil {
		return nil, err
	}
	return &store{dir: dir}, nil
}

// makeCacheDir makes a folder of the cache and removes its temp files: leftovers of a
// process that stopped mid-write (the folder belongs to one cache at a time, so none of
// them is being written now).
func makeCacheDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("image cache: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("image cache: %w", err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tempPrefix) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return fmt.Errorf("image cache: removing leftover %s: %w", e.Name(), err)
			}
		}
	}
	return nil
}

// path is where the blob with this digest lives, whether or not it is there yet.
func (s *store) path(h v1.Hash) (string, error) {
	if h.Algorithm != "sha256" || len(h.Hex) != 64 {
		return "", fmt.Errorf("unsupported digest %q", h)
	}
	if _, err := hex.DecodeString(h.Hex); err != nil {
		return "", fmt.Errorf("digest %q: %w", h, err)
	}
	return filepath.Join(s.dir, h.Hex), nil
}

// has reports whether the blob is in the store.
func (s *store) has(h v1.Hash) (bool, error) {
	p, err := s.path(h)
	if err != nil {
		return false, err
	}
	_, err = os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// ensure makes the blob present, calling fetch only when it is missing. Callers for one
// digest are serialised, so concurrent callers fetch it once. It reports whether it fetched.
func (s *store) ensure(ctx context.Context, h v1.Hash, size int64, fetch func(context.Context) (io.ReadCloser, error)) (string, bool, error) {
	p, err := s.path(h)
	if err != nil {
		return "", false, err
	}
	unlock, err := s.locks.lock(ctx, h.Hex)
	if err != nil {
		return "", false, err
	}
	defer unlock()
	if ok, err := s.has(h); err != nil || ok {
		return p, false, err
	}
	rc, err := fetch(ctx)
	if err != nil {
		return "", false, err
	}
	defer rc.Close()
	if err := s.write(h, size, rc); err != nil {
		return "", false, err
	}
	return p, true, nil
}

// write copies r into the store as blob h, refusing bytes that are not exactly size long
// (when size >= 0) or do not hash to h.
func (s *store) write(h v1.Hash, size int64, r io.Reader) (err error) {
	p, err := s.path(h)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(s.dir, tempPrefix+h.Hex[:12]+"-")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if size >= 0 {
		// One byte more than announced is enough to tell a registry that sends too much.
		r = io.LimitReader(r, size+1)
	}
	sum := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, sum), r)
	if err != nil {
		return fmt.Errorf("blob %s: %w", h, err)
	}
	if size >= 0 && n != size {
		return fmt.Errorf("blob %s: got %d bytes, want %d", h, n, size)
	}
	if got := hex.EncodeToString(sum.Sum(nil)); got != h.Hex {
		return fmt.Errorf("blob %s: content hashes to sha256:%s", h, got)
	}
	// Read-only: callers get paths into the store and must not change what others share.
	if err := tmp.Chmod(0o444); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return err
	}
	return syncDir(s.dir)
}

// syncDir makes a rename inside dir survive a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// keyedMutex is one mutex per key, waited on with a context.
type keyedMutex struct {
	mu   sync.Mutex
	held map[string]chan struct{}
}

func (k *keyedMutex) lock(ctx context.Context, key string) (unlock func(), err error) {
	for {
		k.mu.Lock()
		done, busy := k.held[key]
		if !busy {
			if k.held == nil {
				k.held = map[string]chan struct{}{}
			}
			done = make(chan struct{})
			k.held[key] = done
			k.mu.Unlock()
			return func() {
				k.mu.Lock()
				delete(k.held, key)
				k.mu.Unlock()
				close(done)
			}, nil
		}
		k.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// list returns every blob in the store with its size and modification time.
func (s *store) list() (map[string]cachedBlob, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, err
	}
	out := map[string]cachedBlob{}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tempPrefix) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		out[e.Name()] = cachedBlob{Size: info.Size(), Modified: info.ModTime()}
	}
	return out, nil
}

// remove deletes a blob, waiting for a write of it in progress.
func (s *store) remove(hexDigest string) error {
	unlock, err := s.locks.lock(context.Background(), hexDigest)
	if err != nil {
		return err
	}
	defer unlock()
	err = os.Remove(filepath.Join(s.dir, hexDigest))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}
