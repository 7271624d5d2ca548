package buildagent

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/osimage"
)

// AgentPath is where the agent sits in a builder's root; the test OS runs it from there
// when its first-boot config holds a job.
const AgentPath = "/bin/anvil-build-agent"

// agentEpoch is the time of every file added to the builder: fixed, so the same agent gives
// the same builder image digest (it is part of every build's input hash).
const agentEpoch = 0

// PushBuilder publishes the builder image to reference: for every architecture that has
// both, the test OS of osDir/ARCH with the agent of agentsDir/ARCH/anvil-build-agent added
// to its initramfs. It returns the pinned reference.
func PushBuilder(ctx context.Context, reference, osDir, agentsDir string) (string, error) {
	return PushWithAgent(ctx, reference, osDir, agentsDir, AgentPath)
}

// PushWithAgent publishes to reference the test OS with an agent added at agentPath (an
// absolute path in the guest's root): for every architecture that has both osDir/ARCH and
// agentsDir/ARCH/<agentPath's file name>, as make testos and make agents lay them out. It
// returns the pinned reference. The builder image and the Cluster API node image are made
// by it.
func PushWithAgent(ctx context.Context, reference, osDir, agentsDir, agentPath string) (string, error) {
	work, err := os.MkdirTemp("", "anvil-os-agent-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	sources := map[computev1alpha1.Architecture]string{}
	for _, arch := range computev1alpha1.KnownArchitectures {
		agent := filepath.Join(agentsDir, string(arch), filepath.Base(agentPath))
		if _, err := os.Stat(agent); err != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(osDir, string(arch))); err != nil {
			continue
		}
		out := filepath.Join(work, string(arch))
		if err := writeWithAgent(filepath.Join(osDir, string(arch)), agent, agentPath, out); err != nil {
			return "", fmt.Errorf("%s with %s for %s: %w", osDir, filepath.Base(agentPath), arch, err)
		}
		sources[arch] = out
	}
	if len(sources) == 0 {
		return "", fmt.Errorf("no architecture has both a test OS in %s and %s in %s/ARCH: run make testos agents", osDir, filepath.Base(agentPath), agentsDir)
	}
	pinned, _, err := osimage.PushDirs(ctx, reference, sources, nil)
	return pinned, err
}

// writeWithAgent writes one architecture's files into out: the OS's kernel and command
// line, and its initramfs followed by a second archive holding the agent at agentPath (the
// kernel unpacks concatenated archives in order).
func writeWithAgent(osArchDir, agent, agentPath, out string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for _, f := range []string{"kernel", "cmdline"} {
		if err := copyFile(filepath.Join(osArchDir, f), filepath.Join(out, f)); err != nil {
			return err
		}
	}
	if err := copyFile(filepath.Join(osArchDir, "initramfs"), filepath.Join(out, "initramfs")); err != nil {
		return err
	}
	extra := filepath.Join(out, "extra")
	defer os.RemoveAll(extra)
	if err := os.MkdirAll(filepath.Join(extra, filepath.Dir(agentPath)), 0o755); err != nil {
		return err
	}
	if err := copyFile(agent, filepath.Join(extra, agentPath)); err != nil {
		return err
	}
	if err := os.Chmod(filepath.Join(extra, agentPath), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(out, "initramfs"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	err = packGzip(f, extra, agentEpoch, gzip.BestSpeed)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
