package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/anvil-dev/anvil/internal/kubeimages"
)

func runPush(ctx context.Context, args []string) error {
	f := flag.NewFlagSet("push", flag.ExitOnError)
	out := f.String("out", "bin/kube-images", "the folder build wrote the image layouts into")
	registry := f.String("registry", "", "push to HOST[:PORT]/PREFIX (credentials: DOCKER_CONFIG); kubeadm's imageRepository is the same")
	_ = f.Parse(args)
	if *registry == "" {
		return errors.New("push: -registry HOST[:PORT]/PREFIX is required")
	}
	pushed, err := kubeimages.Push(ctx, *out, *registry)
	for _, ref := range pushed {
		fmt.Printf("kubeimages: pushed %s/%s\n", strings.TrimSuffix(*registry, "/"), ref)
	}
	return err
}
