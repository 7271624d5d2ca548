package imagebuild

import (
	"fmt"
	"strings"
	"testing"

	imagesv1alpha1 "github.com/anvil-dev/anvil/api/images/v1alpha1"
)

// BenchmarkPlan is the figure: planning 4 architectures of a recipe with 200
// context files (every one COPYed), content digests included, as the controller does on
// each reconcile of an OSImage.
func BenchmarkPlan(b *testing.B) {
	content := map[string][]byte{}
	var copies strings.Builder
	for i := 0; i < 200; i++ {
		p := fmt.Sprintf("etc/app/file-%03d.conf", i)
		content[p] = []byte(strings.Repeat(fmt.Sprintf("setting-%d = %d\n", i, i), 64)) // ~1.2 KiB each
		fmt.Fprintf(&copies, "COPY %s /%s\n", p, p)
	}
	files := []imagesv1alpha1.Containerfile{
		{Content: "ARG TARGETARCH\nRUN echo $TARGETARCH > /etc/arch\n" + copies.String()},
		{Architecture: "arm64", Content: "RUN echo arm > /etc/board\n"},
	}
	archs := []string{"amd64", "arm64", "riscv64", "ppc64le"}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := Recipe{Containerfiles: files, Context: make(map[string]string, len(content))}
		for p, c := range content {
			r.Context[p] = ContentDigest(c)
		}
		hashes := map[string]string{}
		for _, a := range archs {
			plan, err := r.ForArchitecture(a, "sha256:base-"+a, "sha256:builder-"+a)
			if err != nil {
				b.Fatal(err)
			}
			hashes[a] = plan.Inputs.Hash()
		}
		_ = BuildName("os", hashes)
	}
}
