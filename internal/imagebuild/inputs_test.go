package imagebuild

import (
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"

	imagesv1alpha1 "github.com/anvil-dev/anvil/api/images/v1alpha1"
)

var archs = []string{"amd64", "arm64", "riscv64", "ppc64le"}

// recipeGen draws a recipe: a file for every architecture, some architectures' own files,
// each COPYing some of a few context files.
func recipeGen(t *rapid.T) Recipe {
	paths := rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"a", "b", "dir/c", "dir/d", "e"}), 1, 5, rapid.ID[string]).Draw(t, "paths")
	r := Recipe{Context: map[string]string{}}
	for _, p := range paths {
		r.Context[p] = ContentDigest([]byte(rapid.StringN(0, 8, -1).Draw(t, "content "+p)))
	}
	file := func(label string) string {
		var b strings.Builder
		for i, n := 0, rapid.IntRange(1, 3).Draw(t, label+" steps"); i < n; i++ {
			if rapid.Bool().Draw(t, label+" copy") {
				fmt.Fprintf(&b, "COPY %s /x/\n", rapid.SampledFrom(paths).Draw(t, label+" src"))
			} else {
				fmt.Fprintf(&b, "RUN echo %s\n", rapid.StringMatching(`[a-z]{0,6}`).Draw(t, label+" word"))
			}
		}
		return b.String()
	}
	r.Containerfiles = append(r.Containerfiles, imagesv1alpha1.Containerfile{Content: file("common")})
	for _, a := range archs {
		if rapid.Bool().Draw(t, "own "+a) {
			r.Containerfiles = append(r.Containerfiles, imagesv1alpha1.Containerfile{Architecture: arch(a), Content: file(a)})
		}
	}
	return r
}

// hashes plans every architecture with fixed base and builder digests.
func hashes(t *rapid.T, r Recipe, base map[string]string) map[string]string {
	out := map[string]string{}
	for _, a := range archs {
		plan, err := r.ForArchitecture(a, base[a], "sha256:builder-"+a)
		if err != nil {
			t.Fatalf("%s: %v", a, err)
		}
		out[a] = plan.Inputs.Hash()
	}
	return out
}

func baseDigests() map[string]string {
	m := map[string]string{}
	for _, a := range archs {
		m[a] = "sha256:base-" + a
	}
	return m
}

// Safety of reuse: no order in the spec reaches a hash.
func TestPropertyReorderingNeverChangesAHash(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := recipeGen(t)
		want := hashes(t, r, baseDigests())
		shuffled := r
		shuffled.Containerfiles = rapid.Permutation(r.Containerfiles).Draw(t, "order")
		shuffled.Context = map[string]string{}
		for _, p := range rapid.Permutation(keys(r.Context)).Draw(t, "context order") {
			shuffled.Context[p] = r.Context[p]
		}
		got := hashes(t, shuffled, baseDigests())
		for _, a := range archs {
			if got[a] != want[a] {
				t.Fatalf("%s: hash changed with the order of the spec", a)
			}
		}
		if BuildName("os", got) != BuildName("os", want) {
			t.Fatalf("the build name changed with the order of the spec")
		}
	})
}

// Independence: changing one architecture's inputs changes that hash and no other.
func TestPropertyOneArchitecturesChangeTouchesOnlyIt(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := recipeGen(t)
		base := baseDigests()
		before := hashes(t, r, base)
		target := rapid.SampledFrom(archs).Draw(t, "target")
		changed := r
		switch rapid.IntRange(0, 1).Draw(t, "change") {
		case 0: // its own Containerfile
			changed.Containerfiles = nil
			found := false
			for _, c := range r.Containerfiles {
				if string(c.Architecture) == target {
					c.Content += "RUN echo changed\n"
					found = true
				}
				changed.Containerfiles = append(changed.Containerfiles, c)
			}
			if !found {
				changed.Containerfiles = append(changed.Containerfiles, imagesv1alpha1.Containerfile{Architecture: arch(target), Content: "RUN echo new\n"})
			}
		case 1: // its base entry
			base = baseDigests()
			base[target] = "sha256:moved"
		}
		after := hashes(t, changed, base)
		for _, a := range archs {
			if a == target && after[a] == before[a] {
				t.Fatalf("%s: its input changed but its hash did not", a)
			}
			if a != target && after[a] != before[a] {
				t.Fatalf("%s: hash changed when only %s's input did", a, target)
			}
		}
	})
}

func TestHashFollowsOnlyTheContextFilesCopied(t *testing.T) {
	r := Recipe{
		Containerfiles: []imagesv1alpha1.Containerfile{
			{Content: "RUN true\n"},
			{Architecture: "arm64", Content: "COPY arm.conf /etc/\n"},
		},
		Context: map[string]string{"arm.conf": ContentDigest([]byte("1")), "unused": ContentDigest([]byte("1"))},
	}
	plan := func(r Recipe, a string) string {
		p, err := r.ForArchitecture(a, "sha256:base", "sha256:builder")
		if err != nil {
			t.Fatal(err)
		}
		return p.Inputs.Hash()
	}
	amd, arm := plan(r, "amd64"), plan(r, "arm64")
	r.Context = map[string]string{"arm.conf": ContentDigest([]byte("2")), "unused": ContentDigest([]byte("2"))}
	if plan(r, "amd64") != amd {
		t.Error("amd64's hash changed with files it never copies")
	}
	if plan(r, "arm64") == arm {
		t.Error("arm64's hash did not change with the content of a file it copies")
	}
	cmdline := "console=ttyS0"
	r.KernelCommandLine = &cmdline
	if plan(r, "amd64") == amd {
		t.Error("a kernel command line override did not change the hash")
	}
}

func TestForArchitectureNamesTheFileAndLine(t *testing.T) {
	r := Recipe{Containerfiles: []imagesv1alpha1.Containerfile{
		{Content: "RUN true\n"},
		{Architecture: "arm64", Content: "RUN true\nEXPOSE 80\n"},
	}}
	if _, err := r.ForArchitecture("amd64", "b", "b"); err != nil {
		t.Errorf("amd64 never reads arm64's file, got %v", err)
	}
	_, err := r.ForArchitecture("arm64", "b", "b")
	if err == nil || err.Error() != "containerfile for arm64, line 2: EXPOSE is not supported: use ARG, ENV, RUN, COPY, WORKDIR or LABEL" {
		t.Errorf("error = %v", err)
	}
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
