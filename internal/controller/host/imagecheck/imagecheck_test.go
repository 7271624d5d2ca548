package imagecheck

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

func TestVerify(t *testing.T) {
	body := []byte("a disk image")
	sum := sha256.Sum256(body)
	good := "sha256:" + hex.EncodeToString(sum[:])
	other := sha256.Sum256([]byte("another"))
	var gets atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/disk" {
			http.NotFound(w, r)
			return
		}
		gets.Add(1)
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	c := &Checker{}
	ctx := context.Background()

	if err := c.Verify(ctx, srv.URL+"/disk", good); err != nil {
		t.Fatalf("good image: %v", err)
	}
	if err := c.Verify(ctx, srv.URL+"/disk", good); err != nil || gets.Load() != 1 {
		t.Fatalf("second check: err %v after %d downloads, want nil after 1", err, gets.Load())
	}
	if err := c.Verify(ctx, srv.URL+"/missing", good); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("404: %v, want ErrUnavailable", err)
	}
	err := c.Verify(ctx, srv.URL+"/disk", "sha256:"+hex.EncodeToString(other[:]))
	if !errors.Is(err, ErrChecksumMismatch) {
		t.Fatalf("wrong checksum: %v, want ErrChecksumMismatch", err)
	}
	// A failure is not remembered: the same wrong checksum downloads again.
	before := gets.Load()
	_ = c.Verify(ctx, srv.URL+"/disk", "sha256:"+hex.EncodeToString(other[:]))
	if gets.Load() != before+1 {
		t.Fatalf("a failed check was cached")
	}
	if err := c.Verify(ctx, srv.URL+"/disk", "md5:abc"); !errors.Is(err, ErrBadChecksum) {
		t.Fatalf("malformed checksum: %v, want ErrBadChecksum", err)
	}
	if err := c.Verify(ctx, "http://127.0.0.1:1/disk", good); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("refused connection: %v, want ErrUnavailable", err)
	}
}
