package osimage

import (
	"sort"
	"time"
)

// cachedImage is what the cache knows of one pulled image (one architecture's entry of a
// top-level digest): every blob it reads, and when it was last pulled.
type cachedImage struct {
	Key      string
	Blobs    []string // hex digests: manifests, config, layers
	LastUsed time.Time
}

// cachedBlob is one blob in the store.
type cachedBlob struct {
	Size     int64
	Modified time.Time
}

// evictionPlan is what to delete to bring a cache under its limit.
type evictionPlan struct {
	Images []string // keys of image records
	Blobs  []string // hex digests
	// Over is the size left when every image that may go is gone and the cache is still
	// above its limit (images in use are never evicted); 0 when under it.
	Over int64
}

// planEviction chooses what to delete to bring blobs under limit bytes: first blobs no
// image names (leftovers of failed pulls) not modified within keepRecent, then the images
// no machine uses (inUse: blobs whose files machines hold) and none is pulling (active),
// least recently used first, each taking the blobs no remaining image shares. Images used
// within keepRecent stay: one a runtime has just pulled may not be recorded as used yet.
func planEviction(images []cachedImage, blobs map[string]cachedBlob, inUse, active map[string]bool, limit int64, now time.Time, keepRecent time.Duration) evictionPlan {
	var total int64
	for _, b := range blobs {
		total += b.Size
	}
	var plan evictionPlan
	if total <= limit {
		return plan
	}
	refs := map[string]int{}
	for _, img := range images {
		for _, b := range img.Blobs {
			refs[b]++
		}
	}
	recent := func(t time.Time) bool { return now.Sub(t) < keepRecent }
	remove := func(h string) {
		b, ok := blobs[h]
		if !ok {
			return
		}
		plan.Blobs = append(plan.Blobs, h)
		total -= b.Size
	}
	strays := make([]string, 0)
	for h, b := range blobs {
		if refs[h] == 0 && !inUse[h] && !recent(b.Modified) {
			strays = append(strays, h)
		}
	}
	sort.Strings(strays)
	for _, h := range strays {
		remove(h)
	}
	var candidates []cachedImage
	for _, img := range images {
		if active[img.Key] || recent(img.LastUsed) || usesAny(img, inUse) {
			continue
		}
		candidates = append(candidates, img)
	}
	sort.Slice(candidates, func(i, j int) bool {
		if !candidates[i].LastUsed.Equal(candidates[j].LastUsed) {
			return candidates[i].LastUsed.Before(candidates[j].LastUsed)
		}
		return candidates[i].Key < candidates[j].Key
	})
	for _, img := range candidates {
		if total <= limit {
			break
		}
		plan.Images = append(plan.Images, img.Key)
		for _, h := range img.Blobs {
			if refs[h]--; refs[h] == 0 && !inUse[h] {
				remove(h)
			}
		}
	}
	if total > limit {
		plan.Over = total - limit
	}
	return plan
}

func usesAny(img cachedImage, inUse map[string]bool) bool {
	for _, b := range img.Blobs {
		if inUse[b] {
			return true
		}
	}
	return false
}
