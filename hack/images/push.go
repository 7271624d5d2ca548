package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/anvil-dev/anvil/config"
	"github.com/anvil-dev/anvil/internal/containerimage"
)

// devRegistry is where anvil dev serves its registry (internal/dev), and devRepository the
// repository prefix the images go under there.
const (
	devRegistry   = "127.0.0.1:5001"
	devRepository = devRegistry + "/anvil"
)

func runPush(ctx context.Context, args []string) error {
	f := flag.NewFlagSet("push", flag.ExitOnError)
	out := f.String("out", "bin/images", "the folder build wrote the image layouts into")
	registry := f.String("registry", "", "push to HOST[:PORT]/PREFIX (credentials: DOCKER_CONFIG); empty: anvil dev's registry ("+devRepository+") when it runs, else nowhere")
	state := f.String("dev-state", ".anvil", "anvil dev's state folder, whose docker/ holds its registry's push credential")
	tag := f.String("tag", "", "the tag (default: each image's version label)")
	root := f.String("root", ".", "the checkout, whose config/ the deploy overlays build on")
	_ = f.Parse(args)
	repo := *registry
	if repo == "" {
		docker := filepath.Join(*state, "docker")
		if !devRegistryAnswers(ctx) {
			fmt.Printf("images: not pushed: anvil dev's registry (%s) is not running; set REGISTRY=HOST/PREFIX to push elsewhere\n", devRegistry)
			return nil
		}
		if _, err := os.Stat(filepath.Join(docker, "config.json")); err != nil {
			fmt.Printf("images: not pushed: anvil dev's registry (%s) answers but its push credential is not in %s: "+
				"run from the folder anvil dev runs in (or pass -dev-state), or set REGISTRY=HOST/PREFIX and DOCKER_CONFIG\n", devRegistry, docker)
			return nil
		}
		if err := os.Setenv("DOCKER_CONFIG", docker); err != nil {
			return err
		}
		repo = devRepository
	}
	pushed := map[string]string{}
	for _, im := range images {
		idx, err := containerimage.ReadLayout(filepath.Join(*out, im.name))
		if err != nil {
			return fmt.Errorf("%w (run go run ./hack/images build first)", err)
		}
		t := *tag
		if t == "" {
			m, err := idx.IndexManifest()
			if err != nil {
				return err
			}
			t = m.Annotations[containerimage.LabelVersion]
		}
		ref := repo + "/" + im.name + ":" + t
		if err := containerimage.Push(ctx, idx, ref); err != nil {
			return err
		}
		d, err := idx.Digest()
		if err != nil {
			return err
		}
		fmt.Printf("images: pushed %s@%s\n", ref, d)
		pushed[im.name] = repo + "/" + im.name + "@" + d.String()
	}
	return writeDeploy(*out, *root, pushed)
}

// writeDeploy writes, under out/deploy, an overlay of config/default, one of
// config/metal-site and one of config/capi naming the images just pushed by digest: what
// kubectl apply -k takes (docs/cluster-install.md).
func writeDeploy(out, root string, pushed map[string]string) error {
	for _, base := range []string{"default", "metal-site", "capi"} {
		dir := filepath.Join(out, "deploy", base)
		abs, err := filepath.Abs(filepath.Join(root, "config", base))
		if err != nil {
			return err
		}
		if err := (config.Overlay{Bases: []string{abs}, Images: pushed}).Write(dir); err != nil {
			return err
		}
		fmt.Printf("images: kubectl apply -k %s\n", dir)
	}
	return nil
}

// devRegistryAnswers reports whether anything speaks HTTP on anvil dev's registry port.
func devRegistryAnswers(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+devRegistry+"/v2/", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return true
}
