// Command kubeimages builds the images a kubeadm cluster's control plane and nodes pull
// (kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy, etcd, coredns,
// pause) from binaries built from pinned sources, and pushes them (docs/images.md):
//
//	go run ./hack/kubeimages build [-bin bin/kube] [-out bin/kube-images]
//	go run ./hack/kubeimages push [-out bin/kube-images] -registry HOST[:PORT]/PREFIX
//
// build reads each image's static binary from -bin/ARCH/NAME and writes one OCI image
// layout per image (-out/NAME), each one index for linux/amd64 and linux/arm64, beside them
// DIGESTS ("NAME:TAG DIGEST"), SIZES and kube-proxy.VERSIONS (its Debian packages). push
// sends each index to PREFIX/NAME:TAG, kubeadm's imageRepository being HOST[:PORT]/PREFIX.
// `make kube-images` builds. It never builds a binary itself: the Makefile does.
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
		fmt.Fprintln(os.Stderr, "kubeimages:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: go run ./hack/kubeimages build|push [flags] (-h for each)")
	os.Exit(2)
}
