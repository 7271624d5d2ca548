package mri

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Every MRI connection opens with one line from the runtime, before gRPC's own bytes:
//
//	anvil-mri/v1alpha1 pool=<name>
//
// so a client knows which pool's runtime it reached before it sends anything (rule I5).
const helloPrefix = "anvil-mri/v1alpha1 pool="

// helloLimit bounds the line: a pool name is a DNS subdomain (253 bytes).
const helloLimit = len(helloPrefix) + 253 + 1

var poolNameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)

// ErrWrongPool means the runtime at the other end serves another MachinePool (rule I5).
var ErrWrongPool = errors.New("the runtime serves another MachinePool")

func writeHello(c net.Conn, pool string) error {
	_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	defer c.SetWriteDeadline(time.Time{})
	_, err := c.Write([]byte(helloPrefix + pool + "\n"))
	return err
}

// readHello reads the runtime's line byte by byte, so nothing after it is consumed.
func readHello(c net.Conn) (string, error) {
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	defer c.SetReadDeadline(time.Time{})
	var line []byte
	b := make([]byte, 1)
	for len(line) < helloLimit {
		if _, err := c.Read(b); err != nil {
			return "", fmt.Errorf("reading the runtime's greeting: %w", err)
		}
		if b[0] == '\n' {
			pool, ok := strings.CutPrefix(string(line), helloPrefix)
			if !ok || (pool != "" && !poolNameRE.MatchString(pool)) {
				return "", fmt.Errorf("the peer's greeting %q is not an MRI runtime's", line)
			}
			return pool, nil
		}
		line = append(line, b[0])
	}
	return "", errors.New("the peer's greeting is too long for an MRI runtime's")
}

// IsWrongPool reports whether err is a call refused because the runtime serves another
// pool.
func IsWrongPool(err error) bool {
	if err == nil {
		return false
	}
	s, ok := status.FromError(err)
	if ok {
		return s.Code() == codes.Unavailable && strings.Contains(s.Message(), ErrWrongPool.Error())
	}
	return errors.Is(err, ErrWrongPool)
}
