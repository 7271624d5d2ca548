// Command anvil-build-agent runs one architecture's OS image build inside a builder Machine
// (see internal/buildagent). It is a small static binary of its own, not a subcommand of
// anvil, because it is packed into the builder's initramfs for every architecture and the
// guest boots it under emulation: every megabyte is boot time.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/anvil-dev/anvil/internal/buildagent"
)

func main() {
	jobPath := flag.String("job", buildagent.JobPath, "the build job (JSON)")
	work := flag.String("work", "/var/lib/anvil-build", "an empty folder for the base, the root and the output")
	powerOff := flag.Bool("power-off", false, "power the machine off when done (in a builder Machine)")
	flag.Parse()
	code := run(*jobPath, *work)
	if *powerOff {
		unix.Sync()
		_ = unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	}
	os.Exit(code)
}

func run(jobPath, work string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := runJob(ctx, jobPath, work)
	if err != nil && res.Status == "" {
		res = buildagent.Result{Status: buildagent.StatusError, Message: err.Error()}
	}
	line, _ := json.Marshal(res) // a struct of strings always marshals
	fmt.Println(buildagent.ResultLinePrefix + string(line))
	if err != nil {
		fmt.Fprintln(os.Stderr, "anvil-build-agent:", err)
	}
	if err != nil || res.Status != buildagent.StatusSucceeded {
		return 1
	}
	return 0
}

func runJob(ctx context.Context, jobPath, work string) (buildagent.Result, error) {
	raw, err := os.ReadFile(jobPath)
	if err != nil {
		return buildagent.Result{}, err
	}
	job, err := buildagent.ParseJob(raw)
	if err != nil {
		return buildagent.Result{}, err
	}
	if err := os.MkdirAll(work, 0o700); err != nil {
		return buildagent.Result{}, err
	}
	if err := buildagent.Configure(job, work); err != nil {
		return buildagent.Result{}, err
	}
	return buildagent.Run(ctx, job, work, os.Stdout)
}
