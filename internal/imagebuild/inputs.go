package imagebuild

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"

	imagesv1alpha1 "github.com/anvil-dev/anvil/api/images/v1alpha1"
	"github.com/anvil-dev/anvil/internal/imagebuild/containerfile"
)

// FormatVersion names the encoding of Inputs; a change of encoding changes every hash.
const FormatVersion = "images.anvil.dev/inputs/v1"

// AgentVersion is the build agent's behaviour version: raise it when the same inputs would
// give a different image (a new packing rule), so every architecture rebuilds once.
const AgentVersion = "1"

// Inputs is everything that can change one architecture's image.
type Inputs struct {
	Architecture  string
	BaseDigest    string // the base index's entry for the architecture
	BuilderDigest string // the builder image's entry for the architecture
	AgentVersion  string
	// Containerfile is the effective text: the file of every architecture, then this
	// architecture's own.
	Containerfile string
	// Context maps each context path the build's COPY steps read to its content digest.
	Context map[string]string
	// KernelCommandLine replaces the base's when set.
	KernelCommandLine *string
}

// Hash is the hex sha256 of the canonical encoding of the inputs: JSON with fixed field
// order and the context sorted by path.
func (in Inputs) Hash() string {
	type file struct {
		Path   string `json:"path"`
		Digest string `json:"digest"`
	}
	type cmdline struct {
		Set   bool   `json:"set"`
		Value string `json:"value"`
	}
	canonical := struct {
		Format        string  `json:"format"`
		Architecture  string  `json:"architecture"`
		Base          string  `json:"base"`
		Builder       string  `json:"builder"`
		Agent         string  `json:"agent"`
		Containerfile string  `json:"containerfile"`
		Context       []file  `json:"context"`
		Cmdline       cmdline `json:"kernelCommandLine"`
	}{FormatVersion, in.Architecture, in.BaseDigest, in.BuilderDigest, in.AgentVersion, in.Containerfile, []file{}, cmdline{}}
	for p, d := range in.Context {
		canonical.Context = append(canonical.Context, file{p, d})
	}
	sort.Slice(canonical.Context, func(i, j int) bool { return canonical.Context[i].Path < canonical.Context[j].Path })
	if in.KernelCommandLine != nil {
		canonical.Cmdline = cmdline{true, *in.KernelCommandLine}
	}
	b, err := json.Marshal(canonical)
	if err != nil { // strings and slices of strings always marshal
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// ContentDigest is the digest recorded for a context file's bytes.
func ContentDigest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Recipe is an OSImage's build steps and context, as the controller read them.
type Recipe struct {
	Containerfiles []imagesv1alpha1.Containerfile
	// Context maps each context path to its content digest (ContentDigest).
	Context           map[string]string
	KernelCommandLine *string
}

// Arch is one architecture's share of a recipe: its program and its inputs.
type Arch struct {
	Program containerfile.Program
	Inputs  Inputs
}

// ForArchitecture parses and interprets the recipe for arch, with the base and builder
// entries for that architecture. Errors are *containerfile.Error and name file and line.
func (r Recipe) ForArchitecture(arch, baseDigest, builderDigest string) (Arch, error) {
	var common, own string
	for _, c := range r.Containerfiles {
		switch string(c.Architecture) {
		case "":
			common = c.Content
		case arch:
			own = c.Content
		}
	}
	steps, err := containerfile.Parse("", common)
	if err != nil {
		return Arch{}, err
	}
	ownSteps, err := containerfile.Parse(arch, own)
	if err != nil {
		return Arch{}, err
	}
	paths := make([]string, 0, len(r.Context))
	for p := range r.Context {
		paths = append(paths, p)
	}
	prog, err := containerfile.Interpret(arch, append(steps, ownSteps...), paths)
	if err != nil {
		return Arch{}, err
	}
	in := Inputs{
		Architecture: arch, BaseDigest: baseDigest, BuilderDigest: builderDigest, AgentVersion: AgentVersion,
		Containerfile: EffectiveContainerfile(common, own), Context: map[string]string{}, KernelCommandLine: r.KernelCommandLine,
	}
	for _, p := range prog.ContextFiles {
		in.Context[p] = r.Context[p]
	}
	return Arch{Program: prog, Inputs: in}, nil
}

// EffectiveContainerfile joins the file of every architecture and an architecture's own.
func EffectiveContainerfile(common, own string) string {
	if own == "" {
		return common
	}
	return fmt.Sprintf("%s\n# architecture's own steps\n%s", common, own)
}
