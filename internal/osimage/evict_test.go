package osimage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/anvil-dev/anvil/internal/registrynet"
)

func TestPlanEviction(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	old := ago(time.Hour)
	img := func(key string, used time.Time, blobs ...string) cachedImage {
		return cachedImage{Key: key, Blobs: blobs, LastUsed: used}
	}
	blobs := func(sizes map[string]int64) map[string]cachedBlob {
		out := map[string]cachedBlob{}
		for h, s := range sizes {
			out[h] = cachedBlob{Size: s, Modified: old}
		}
		return out
	}
	set := func(s ...string) map[string]bool {
		out := map[string]bool{}
		for _, e := range s {
			out[e] = true
		}
		return out
	}
	for _, tc := range []struct {
		name          string
		images        []cachedImage
		blobs         map[string]cachedBlob
		inUse, active map[string]bool
		limit         int64
		want          evictionPlan
	}{
		{name: "under the limit: nothing", images: []cachedImage{img("a", old, "a1")}, blobs: blobs(map[string]int64{"a1": 10}), limit: 10},
		{name: "least recently used goes first",
			images: []cachedImage{img("a", ago(3*time.Hour), "a1"), img("b", ago(2*time.Hour), "b1"), img("c", old, "c1")},
			blobs:  blobs(map[string]int64{"a1": 10, "b1": 10, "c1": 10}), limit: 20,
			want: evictionPlan{Images: []string{"a"}, Blobs: []string{"a1"}}},
		{name: "an image a machine uses stays, however old",
			images: []cachedImage{img("a", ago(3*time.Hour), "a1", "a2"), img("b", ago(2*time.Hour), "b1"), img("c", old, "c1")},
			blobs:  blobs(map[string]int64{"a1": 10, "a2": 10, "b1": 10, "c1": 10}), inUse: set("a2"), limit: 30,
			want: evictionPlan{Images: []string{"b"}, Blobs: []string{"b1"}}},
		{name: "an image being pulled stays",
			images: []cachedImage{img("a", ago(3*time.Hour), "a1"), img("b", ago(2*time.Hour), "b1")},
			blobs:  blobs(map[string]int64{"a1": 10, "b1": 10}), active: set("a"), limit: 10,
			want: evictionPlan{Images: []string{"b"}, Blobs: []string{"b1"}}},
		{name: "a recently used image stays",
			images: []cachedImage{img("a", ago(time.Second), "a1"), img("b", old, "b1")},
			blobs:  blobs(map[string]int64{"a1": 10, "b1": 10}), limit: 0,
			want: evictionPlan{Images: []string{"b"}, Blobs: []string{"b1"}, Over: 10}},
		{name: "a blob another image shares stays",
			images: []cachedImage{img("a", ago(2*time.Hour), "idx", "k"), img("b", old, "idx2", "k")},
			blobs:  blobs(map[string]int64{"idx": 1, "idx2": 1, "k": 100}), limit: 101,
			want: evictionPlan{Images: []string{"a"}, Blobs: []string{"idx"}}},
		{name: "old leftovers no image names go before any image",
			images: []cachedImage{img("a", old, "a1")},
			blobs:  blobs(map[string]int64{"a1": 10, "stray": 10}), limit: 10,
			want: evictionPlan{Blobs: []string{"stray"}}},
		{name: "a fresh leftover may be a pull's manifest: it stays",
			images: []cachedImage{img("a", old, "a1")},
			blobs:  map[string]cachedBlob{"a1": {Size: 10, Modified: old}, "new": {Size: 10, Modified: ago(time.Second)}}, limit: 10,
			want: evictionPlan{Images: []string{"a"}, Blobs: []string{"a1"}}},
		{name: "everything in use: over the limit, nothing deleted",
			images: []cachedImage{img("a", old, "a1")},
			blobs:  blobs(map[string]int64{"a1": 50}), inUse: set("a1"), limit: 10,
			want: evictionPlan{Over: 40}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := planEviction(tc.images, tc.blobs, tc.inUse, tc.active, tc.limit, now, time.Minute)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// Three images pulled into a cache that holds two: the one no machine uses and that was
// used longest ago is evicted; the oldest, which a machine uses, stays.
func TestCacheEvictsUnusedImagesOverItsLimit(t *testing.T) {
	reg := startRegistry(t)
	var refs []string
	for _, name := range []string{"a", "b", "c"} {
		idx, err := Index(mustBuild(t, writeArtifacts(t, amd64, 1<<20, 1000)))
		if err != nil {
			t.Fatal(err)
		}
		ref := reg.Host + "/anvil/" + name + ":1"
		if _, err := Push(context.Background(), ref, idx); err != nil {
			t.Fatal(err)
		}
		refs = append(refs, ref)
	}
	dir := t.TempDir()
	c, err := NewCache(dir, CacheOptions{MaxBytes: 2<<20 + 64<<10, KeepRecent: time.Nanosecond,
		Network: registrynet.Policy{Allow: registrynet.Loopback}})
	if err != nil {
		t.Fatal(err)
	}
	var used []string
	c.SetInUse(func() []string { return used })
	pulled := map[string]Files{}
	for _, ref := range refs {
		f, err := c.Pull(context.Background(), ref, "", amd64)
		if err != nil {
			t.Fatal(err)
		}
		pulled[ref] = f
		if ref == refs[0] {
			// A machine boots from a, known by its files' digests (as the metal runtime
			// knows its Hosts'); a digest of another form names no file.
			used = c.BlobPaths([]string{"sha256:" + filepath.Base(f.Kernel), "sha256:" + filepath.Base(f.Initramfs), "md5:00"})
			if len(used) != 2 || used[0] != f.Kernel {
				t.Fatalf("BlobPaths: %v, want %s and %s", used, f.Kernel, f.Initramfs)
			}
		}
		time.Sleep(10 * time.Millisecond) // distinct last-use times
	}
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	if !exists(pulled[refs[0]].Kernel) {
		t.Error("the image a machine uses was evicted")
	}
	if exists(pulled[refs[1]].Kernel) {
		t.Error("the least recently used image no machine uses is still there")
	}
	if !exists(pulled[refs[2]].Kernel) {
		t.Error("the image just pulled was evicted")
	}
	if _, err := os.Stat(filepath.Join(dir, "images")); err != nil {
		t.Fatal(err)
	}
	// The evicted image pulls again.
	if _, err := c.Pull(context.Background(), refs[1], "", amd64); err != nil {
		t.Fatalf("pulling the evicted image again: %v", err)
	}
}

// Safety: whatever the cache holds, eviction never takes an image a machine uses, one
// being pulled or one used recently, nor a blob such an image reads. Liveness: when the
// images it may take are enough, the cache ends under its limit.
func TestPlanEvictionProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
		const keep = time.Minute
		nBlobs := rapid.IntRange(1, 12).Draw(t, "blobs")
		blobs := map[string]cachedBlob{}
		for i := 0; i < nBlobs; i++ {
			blobs[fmt.Sprint("b", i)] = cachedBlob{Size: rapid.Int64Range(1, 100).Draw(t, "size"),
				Modified: now.Add(-time.Duration(rapid.IntRange(0, 120).Draw(t, "blobAge")) * time.Second)}
		}
		var images []cachedImage
		for i, n := 0, rapid.IntRange(0, 6).Draw(t, "images"); i < n; i++ {
			img := cachedImage{Key: fmt.Sprint("i", i), LastUsed: now.Add(-time.Duration(rapid.IntRange(0, 7200).Draw(t, "age")) * time.Second)}
			for j, m := 0, rapid.IntRange(1, 4).Draw(t, "n"); j < m; j++ {
				img.Blobs = append(img.Blobs, fmt.Sprint("b", rapid.IntRange(0, nBlobs-1).Draw(t, "blob")))
			}
			images = append(images, img)
		}
		inUse, active := map[string]bool{}, map[string]bool{}
		for h := range blobs {
			if rapid.IntRange(0, 5).Draw(t, "used") == 0 {
				inUse[h] = true
			}
		}
		for _, img := range images {
			if rapid.IntRange(0, 5).Draw(t, "active") == 0 {
				active[img.Key] = true
			}
		}
		limit := rapid.Int64Range(0, 600).Draw(t, "limit")
		plan := planEviction(images, blobs, inUse, active, limit, now, keep)

		evicted := map[string]bool{}
		for _, k := range plan.Images {
			evicted[k] = true
		}
		protected := map[string]bool{}
		for _, img := range images {
			kept := !evicted[img.Key]
			if !kept && (active[img.Key] || now.Sub(img.LastUsed) < keep || usesAny(img, inUse)) {
				t.Fatalf("evicted protected image %s", img.Key)
			}
			if kept {
				for _, h := range img.Blobs {
					protected[h] = true
				}
			}
		}
		var left int64
		removed := map[string]bool{}
		for _, h := range plan.Blobs {
			if removed[h] {
				t.Fatalf("blob %s removed twice", h)
			}
			removed[h] = true
			if protected[h] || inUse[h] {
				t.Fatalf("removed blob %s, which a kept image or a machine reads", h)
			}
		}
		for h, b := range blobs {
			if !removed[h] {
				left += b.Size
			}
		}
		if plan.Over > 0 {
			for _, img := range images {
				if !evicted[img.Key] && !active[img.Key] && now.Sub(img.LastUsed) >= keep && !usesAny(img, inUse) {
					t.Fatalf("over the limit by %d, yet image %s, which may go, was kept", plan.Over, img.Key)
				}
			}
		}
		if plan.Over != max(0, left-limit) {
			t.Fatalf("Over = %d, but %d bytes are left for a limit of %d", plan.Over, left, limit)
		}
	})
}
