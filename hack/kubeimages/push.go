package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/anvil-dev/anvil/internal/containerimage"
)

func runPush(ctx context.Context, args []string) error {
	f := flag.NewFlagSet("push", flag.ExitOnError)
	out := f.String("out", "bin/kube-images", "the folder build wrote the image layouts into")
	registry := f.String("registry", "", "push to HOST[:PORT]/PREFIX (credentials: DOCKER_CONFIG); kubeadm's imageRepository is the same")
	_ = f.Parse(args)
	if *registry == "" {
		return errors.New("push: -registry HOST[:PORT]/PREFIX is required")
	}
	repo := strings.TrimSuffix(*registry, "/")
	for _, im := range kubeImages {
		idx, err := containerimage.ReadLayout(filepath.Join(*out, im.name))
		if err != nil {
			return fmt.Errorf("%w (run go run ./hack/kubeimages build first)", err)
		}
		ref := repo + "/" + im.name + ":" + im.tag
		if err := containerimage.Push(ctx, idx, ref); err != nil {
			return err
		}
		d, err := idx.Digest()
		if err != nil {
			return err
		}
		fmt.Printf("kubeimages: pushed %s@%s\n", ref, d)
	}
	return nil
}
