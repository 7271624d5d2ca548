package osimage

import (
	"context"
	"os"
	"testing"
)

// BenchmarkColdPull pulls the amd64 entry of a two-architecture image of realistic size
// (10 MiB kernel + 20 MiB initramfs, random so nothing compresses) from the embedded
// registry into an empty cache each iteration.
func BenchmarkColdPull(b *testing.B) {
	const kernel, initramfs = 10 << 20, 20 << 20
	reg := startRegistry(b)
	amd := writeArtifacts(b, amd64, kernel, initramfs)
	arm := writeArtifacts(b, arm64, 1<<20, 1<<20)
	idx, err := Index(mustBuild(b, amd), mustBuild(b, arm))
	if err != nil {
		b.Fatal(err)
	}
	ref := reg.Host + "/anvil/bench:1"
	digest, err := Push(context.Background(), ref, idx)
	if err != nil {
		b.Fatal(err)
	}
	root := b.TempDir()
	b.SetBytes(kernel + initramfs)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		dir, err := os.MkdirTemp(root, "cache-")
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		c, err := NewCache(dir, loopbackOnly)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.Pull(context.Background(), ref, digest, amd64); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := os.RemoveAll(dir); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
