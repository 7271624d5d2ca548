package site

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/ironic"
	"github.com/anvil-dev/anvil/internal/provisioner"
)

// WipeMethod is how a site erases a released server's disks before anyone else gets it.
type WipeMethod string

const (
	// WipeEraser: the Host controller deploys the site's eraser (make eraser: a kernel and
	// initramfs that zero each disk's first and last MiB, or all of it, then power off)
	// through the provisioner's ramdisk deploy; the Host is Available only after it ran.
	WipeEraser WipeMethod = "eraser"
	// WipeIronic: Ironic's automated cleaning (erase_devices_metadata, or erase_devices with
	// Full), which needs Ironic's agent ramdisk; anvil ships none, so this is untested here.
	WipeIronic WipeMethod = "ironic"
	// WipeNone: released servers keep what their last tenant left on their disks. Only for
	// sites whose servers have no disks, or fake hardware.
	WipeNone WipeMethod = "none"
)

// Wipe configures the wiping of released servers.
type Wipe struct {
	// Method is required: a site never wipes nothing by default.
	Method WipeMethod
	// EraserDir holds the eraser per architecture, ARCH/{kernel,initramfs,cmdline} (make
	// eraser: bin/eraser builds amd64 and arm64), for WipeEraser. A Host of an architecture
	// it lacks is never wiped, so never Available again once used: its Wiped condition says so.
	EraserDir string
	// Full erases every block of every disk instead of the first and last MiB.
	Full bool
	// Timeout is how long the eraser may run before the wipe counts as failed (default 30
	// minutes; a full erase of big disks needs hours).
	Timeout time.Duration
}

func (w Wipe) check() error {
	switch w.Method {
	case WipeEraser:
		if w.EraserDir == "" {
			return errors.New("wipe method eraser needs the eraser's folder (make eraser builds bin/eraser)")
		}
	case WipeIronic, WipeNone:
		if w.EraserDir != "" {
			return fmt.Errorf("an eraser folder is given but the wipe method is %s, not eraser", w.Method)
		}
	case "":
		return errors.New("a site needs a wipe method: eraser (with the eraser's folder), ironic (Ironic's cleaning, with its agent ramdisk) or none")
	default:
		return fmt.Errorf("unknown wipe method %q: eraser, ironic or none", w.Method)
	}
	return nil
}

// cleaning is Ironic's automated cleaning for w.
func (w Wipe) cleaning() ironic.Cleaning {
	switch {
	case w.Method != WipeIronic:
		return ironic.CleanNone
	case w.Full:
		return ironic.CleanFull
	}
	return ironic.CleanMetadata
}

// eraserServer serves copies of the eraser's files, taken at start (so a rebuild of the
// folder never serves other bytes than the checksums the Hosts are deployed with), on
// loopback, to the provisioner, which fetches them to build its boot ISOs.
type eraserServer struct {
	srv    *http.Server
	images map[computev1alpha1.Architecture]provisioner.Image
}

// serveEraser copies the eraser of every architecture w.EraserDir has into dir and serves
// it. A folder with none, or an incomplete architecture, is an error naming the file.
func serveEraser(w Wipe, dir string) (*eraserServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	base := "http://" + ln.Addr().String()
	if err := os.RemoveAll(dir); err != nil {
		_ = ln.Close()
		return nil, err
	}
	images := map[computev1alpha1.Architecture]provisioner.Image{}
	for _, arch := range computev1alpha1.KnownArchitectures {
		if _, err := os.Stat(filepath.Join(w.EraserDir, string(arch))); errors.Is(err, os.ErrNotExist) {
			continue
		}
		img := provisioner.Image{}
		for _, name := range []string{"kernel", "initramfs"} {
			sum, err := copyFile(filepath.Join(w.EraserDir, string(arch), name), filepath.Join(dir, string(arch), name))
			if err != nil {
				_ = ln.Close()
				return nil, fmt.Errorf("the eraser: %w (make eraser builds bin/eraser)", err)
			}
			f := &provisioner.File{URL: fmt.Sprintf("%s/%s/%s", base, arch, name), Checksum: "sha256:" + sum}
			if name == "kernel" {
				img.Kernel = f
			} else {
				img.Initramfs = f
			}
		}
		cmdline, err := os.ReadFile(filepath.Join(w.EraserDir, string(arch), "cmdline"))
		if err != nil {
			_ = ln.Close()
			return nil, fmt.Errorf("the eraser: %w (make eraser builds bin/eraser)", err)
		}
		args := strings.TrimSpace(string(cmdline))
		if w.Full {
			args += " anvil.erase=full"
		}
		img.KernelArguments = args
		images[arch] = img
	}
	if len(images) == 0 {
		_ = ln.Close()
		return nil, fmt.Errorf("the eraser folder %s has no architecture's eraser in it (make eraser builds bin/eraser)", w.EraserDir)
	}
	s := &eraserServer{images: images, srv: &http.Server{Handler: http.FileServer(http.Dir(dir)), ReadHeaderTimeout: 10 * time.Second}}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *eraserServer) Close() {
	if s != nil {
		_ = s.srv.Shutdown(context.Background())
	}
}

// copyFile copies src to dst and returns its sha256 in hex.
func copyFile(src, dst string) (string, error) {
	in, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(out, h), in); err != nil {
		_ = out.Close()
		return "", err
	}
	if err := out.Close(); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
