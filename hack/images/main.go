// Command images builds anvil's container images and pushes them (docs/images.md):
//
//	go run ./hack/images build [-out bin/images] [-bin bin] [-image NAME]
//	go run ./hack/images push [-out bin/images] [-registry HOST/PREFIX] [-tag TAG]
//
// build writes one OCI image layout per image (bin/images/anvil, anvil-qemu, anvil-metal),
// each holding one index for linux/amd64 and linux/arm64, beside it the Debian packages
// used (NAME.VERSIONS), and bin/images/SIZES and DIGESTS (-image builds one of them alone:
// test/images' reproducibility check). push sends each index to
// HOST/PREFIX/NAME:TAG; without -registry, to anvil dev's registry when it runs, else
// nowhere (said so, not an error). `make images` does both.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "build":
		err = runBuild(ctx, os.Args[2:])
	case "push":
		err = runPush(ctx, os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: go run ./hack/images build|push [flags] (-h for each)")
	os.Exit(2)
}
