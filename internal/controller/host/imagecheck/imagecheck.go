// Package imagecheck verifies a disk image before a server is asked to write it: that its
// URL answers and that its bytes have the checksum the Host gives. A provisioner's agent
// would find either fault only after the server has booted into it, minutes later, and
// with the fake hardware of tests never; checking first turns both into a clear condition
// on the Host at once.
package imagecheck

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
)

// Errors of Verify, wrapped with the details.
var (
	// ErrUnavailable: the URL could not be read (refused, 404, 5xx).
	ErrUnavailable = errors.New("image unavailable")
	// ErrChecksumMismatch: the bytes at the URL have another checksum.
	ErrChecksumMismatch = errors.New("image checksum mismatch")
	// ErrBadChecksum: the checksum is not sha256:<64 hex digits>.
	ErrBadChecksum = errors.New("image checksum malformed")
)

// Checker verifies images and remembers the ones that passed, so a fleet provisioned with
// one image downloads it once. Failures are not remembered: a fixed image passes next time.
type Checker struct {
	HTTP *http.Client

	mu       sync.Mutex
	verified map[string]bool
	inflight map[string]*call
}

type call struct {
	done chan struct{}
	err  error
}

// Verify reads url to the end and compares its sha256 with checksum.
func (c *Checker) Verify(ctx context.Context, url, checksum string) error {
	want, ok := strings.CutPrefix(checksum, "sha256:")
	if !ok || len(want) != sha256.Size*2 {
		return fmt.Errorf("%w: %q", ErrBadChecksum, checksum)
	}
	key := url + "\x00" + checksum
	c.mu.Lock()
	if c.verified == nil {
		c.verified, c.inflight = map[string]bool{}, map[string]*call{}
	}
	if c.verified[key] {
		c.mu.Unlock()
		return nil
	}
	if in, ok := c.inflight[key]; ok {
		// Another Host is checking the same image: share its answer.
		c.mu.Unlock()
		select {
		case <-in.done:
			return in.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	in := &call{done: make(chan struct{})}
	c.inflight[key] = in
	c.mu.Unlock()

	in.err = c.fetch(ctx, url, want)
	c.mu.Lock()
	delete(c.inflight, key)
	if in.err == nil {
		c.verified[key] = true
	}
	c.mu.Unlock()
	close(in.done)
	return in.err
}

func (c *Checker) fetch(ctx context.Context, url, want string) error {
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: GET %s answered %s", ErrUnavailable, url, resp.Status)
	}
	h := sha256.New()
	if _, err := io.Copy(h, resp.Body); err != nil {
		return fmt.Errorf("%w: reading %s: %v", ErrUnavailable, url, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return fmt.Errorf("%w: %s has sha256:%s, the Host asks for sha256:%s", ErrChecksumMismatch, url, got, want)
	}
	return nil
}
