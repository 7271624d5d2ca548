package osimage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// imageLog records which blobs each pulled image reads and when it was last pulled (the
// record's modification time), so the cache can evict whole images: <root>/images/<key>.json.
type imageLog struct {
	dir string

	mu     sync.Mutex
	active map[string]int // images being pulled now
	inUse  func() []string
}

func openImageLog(root string) (*imageLog, error) {
	dir := filepath.Join(root, "images")
	if err := makeCacheDir(dir); err != nil {
		return nil, err
	}
	return &imageLog{dir: dir, active: map[string]int{}}, nil
}

// begin marks an image as being pulled, which keeps it from eviction until done is called.
func (l *imageLog) begin(key string) (done func()) {
	l.mu.Lock()
	l.active[key]++
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		if l.active[key]--; l.active[key] == 0 {
			delete(l.active, key)
		}
		l.mu.Unlock()
	}
}

type imageRecord struct {
	Reference string   `json:"reference"`
	Blobs     []string `json:"blobs"`
}

// record writes (or touches) the record of an image: now is its last use.
func (l *imageLog) record(key, reference string, blobs []string) error {
	b, err := json.Marshal(imageRecord{Reference: reference, Blobs: blobs})
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(l.dir, tempPrefix)
	if err != nil {
		return err
	}
	_, err = tmp.Write(b)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(l.dir, key+".json"))
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
	}
	return err
}

func (l *imageLog) read() ([]cachedImage, error) {
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		return nil, err
	}
	var out []cachedImage
	for _, e := range entries {
		key, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		raw, err := os.ReadFile(filepath.Join(l.dir, e.Name()))
		if err != nil {
			continue
		}
		var r imageRecord
		if err := json.Unmarshal(raw, &r); err != nil {
			return nil, fmt.Errorf("image cache: record %s: %w", e.Name(), err)
		}
		out = append(out, cachedImage{Key: key, Blobs: r.Blobs, LastUsed: info.ModTime()})
	}
	return out, nil
}

// SetInUse tells the cache which of its files machines use (the paths Pull returned), so
// eviction never takes them. Nothing is evicted before it is called.
func (c *Cache) SetInUse(files func() []string) {
	c.images.mu.Lock()
	c.images.inUse = files
	c.images.mu.Unlock()
}

// BlobPaths are the files of the blobs with these digests ("sha256:<hex>"), as Pull
// returns them: what a runtime that knows its machines' files by digest (the metal
// runtime: its Hosts' checksums) gives SetInUse. A digest of another form names no file.
func (c *Cache) BlobPaths(digests []string) []string {
	var out []string
	for _, d := range digests {
		h, err := v1.NewHash(d)
		if err != nil {
			continue
		}
		if p, err := c.store.path(h); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// evict brings the cache under MaxBytes by deleting images no machine uses.
func (c *Cache) evict(ctx context.Context) error {
	if c.opts.MaxBytes <= 0 {
		return nil
	}
	l := c.images
	if l.inUse == nil {
		// Until the runtime says what its machines use, any image may be in use.
		return nil
	}
	// Held throughout: a pull that begins meanwhile waits to mark its image active, so
	// nothing it is about to read is deleted under it.
	l.mu.Lock()
	defer l.mu.Unlock()
	images, err := l.read()
	if err != nil {
		return err
	}
	blobs, err := c.store.list()
	if err != nil {
		return err
	}
	inUse := map[string]bool{}
	for _, p := range l.inUse() {
		if filepath.Dir(p) == c.store.dir {
			inUse[filepath.Base(p)] = true
		}
	}
	active := map[string]bool{}
	for k := range l.active {
		active[k] = true
	}
	plan := planEviction(images, blobs, inUse, active, c.opts.MaxBytes, time.Now(), c.opts.KeepRecent)
	for _, k := range plan.Images {
		if err := os.Remove(filepath.Join(l.dir, k+".json")); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	for _, h := range plan.Blobs {
		if err := c.store.remove(h); err != nil {
			return err
		}
	}
	log := logr.FromContextOrDiscard(ctx)
	if len(plan.Images)+len(plan.Blobs) > 0 {
		log.Info("Evicted images from the cache", "images", len(plan.Images), "blobs", len(plan.Blobs))
	}
	if plan.Over > 0 {
		log.Info("Image cache is over its limit with images machines use", "overBytes", plan.Over, "limitBytes", c.opts.MaxBytes)
	}
	return nil
}
