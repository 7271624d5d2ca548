package imagebuild

import (
	"testing"

	imagesv1alpha1 "github.com/anvil-dev/anvil/api/images/v1alpha1"
)

func TestPackageManagerStep(t *testing.T) {
	for _, tc := range []struct {
		recipe string
		line   int // 0: none
	}{
		{"RUN apt-get update && apt-get install -y hello", 1},
		{"RUN echo hi\nRUN apt install -y hello", 2},
		{"RUN echo hi;apt-get update", 1},
		{"RUN DEBIAN_FRONTEND=noninteractive apt-get install -y hello", 1},
		{"RUN sudo /usr/bin/apt-get update", 1},
		{"RUN [\"/usr/bin/apt-get\", \"update\"]", 1},
		{"RUN true || (apt-get update)", 1},
		{"RUN echo $(apt-get --version)", 1},
		{"ENV A=apt-get\nRUN echo apt-get install is not run here", 0},
		{"RUN echo hi > /etc/apt/sources.list.d/x.list", 0},
		{"RUN dpkg -i /tmp/x.deb", 0},
		{"RUN grep apt-get /etc/motd", 0},
		{"RUN [\"echo\", \"apt-get\"]", 0},
		{"RUN [\"sh\", \"-c\", \"apt-get update\"]", 1},
	} {
		plan, err := Recipe{Containerfiles: []imagesv1alpha1.Containerfile{{Content: tc.recipe}}}.ForArchitecture("amd64", "", "")
		if err != nil {
			t.Fatalf("%q: %v", tc.recipe, err)
		}
		step, ok := PackageManagerStep(plan.Program)
		if got := map[bool]int{true: step.Line}[ok]; got != tc.line {
			t.Errorf("%q: line %d (%v), want %d", tc.recipe, got, ok, tc.line)
		}
	}
}
