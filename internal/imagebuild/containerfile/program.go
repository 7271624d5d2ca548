package containerfile

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/moby/buildkit/frontend/dockerfile/shell"
)

// OS is the platform OS every build targets.
const OS = "linux"

// Program is one architecture's recipe with every variable expanded: what the build agent
// runs, in order, inside the image's root.
type Program struct {
	Architecture string
	Ops          []Op
	// Labels become the image's annotations.
	Labels map[string]string
	// ContextFiles are the context paths the COPY steps read, sorted, each once.
	ContextFiles []string
}

// OpKind is what an operation does.
type OpKind int

const (
	OpInvalid OpKind = iota
	// OpRun runs Argv in the root, in Dir, with Env.
	OpRun
	// OpCopy writes context files into the root.
	OpCopy
	// OpWorkdir creates Dir in the root.
	OpWorkdir
)

// Op is one operation, with the step it came from for logs and errors.
type Op struct {
	Kind OpKind
	Step Step
	// Argv of a RUN: the exec form as written, or the shell form as /bin/sh -c.
	Argv []string
	// Env of a RUN: KEY=VALUE, sorted by key.
	Env []string
	// Dir is the working directory (RUN) or the directory to create (WORKDIR).
	Dir string
	// Copies of a COPY, in order.
	Copies []Copy
}

// Copy is one context file written to an absolute path in the root.
type Copy struct {
	From string // context path
	To   string // absolute path in the root
}

// vars is the values of ARGs and ENVs in scope; it is buildkit's EnvGetter.
type vars map[string]string

func (v vars) Get(k string) (string, bool) { s, ok := v[k]; return s, ok }
func (v vars) Keys() []string {
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// PlatformArgs are the ARGs every build predefines; like Docker's, each is in scope once an
// ARG names it.
func PlatformArgs(arch string) map[string]string {
	return map[string]string{"TARGETARCH": arch, "TARGETOS": OS, "TARGETPLATFORM": OS + "/" + arch}
}

// Interpret expands steps for one architecture. context is the set of context file paths
// COPY may read.
func Interpret(arch string, steps []Step, context []string) (Program, error) {
	p := Program{Architecture: arch, Labels: map[string]string{}}
	platform := PlatformArgs(arch)
	args, env := vars{}, vars{}
	dir := "/"
	lex := shell.NewLex('\\')
	files := map[string]bool{}
	for _, c := range context {
		files[c] = true
	}
	read := map[string]bool{}

	// scope is what a word may name: ARGs, then ENVs over them (as in Docker).
	scope := func() vars {
		s := vars{}
		for k, v := range args {
			s[k] = v
		}
		for k, v := range env {
			s[k] = v
		}
		return s
	}
	for _, s := range steps {
		fail := func(format string, a ...any) error {
			return &Error{File: s.File, Line: s.Line, Msg: fmt.Sprintf(format, a...)}
		}
		word := func(w string) (string, error) {
			out, _, err := lex.ProcessWord(w, scope())
			if err != nil {
				return "", fail("%s: %v", w, err)
			}
			return out, nil
		}
		switch s.Kind {
		case KindArg:
			for _, a := range s.Args {
				name, def, hasDefault := strings.Cut(a, "=")
				if !validName(name) {
					return Program{}, fail("ARG %q: not a valid name", name)
				}
				if v, ok := platform[name]; ok {
					args[name] = v
					continue
				}
				if !hasDefault {
					continue
				}
				v, err := word(def)
				if err != nil {
					return Program{}, err
				}
				args[name] = v
			}
		case KindEnv, KindLabel:
			for i := 0; i+1 < len(s.Args); i += 3 {
				k, err := word(s.Args[i])
				if err != nil {
					return Program{}, err
				}
				v, err := word(s.Args[i+1])
				if err != nil {
					return Program{}, err
				}
				if s.Kind == KindLabel {
					p.Labels[k] = v
					continue
				}
				if !validName(k) {
					return Program{}, fail("ENV %q: not a valid name", k)
				}
				env[k] = v
			}
		case KindWorkdir:
			w, err := word(s.Args[0])
			if err != nil {
				return Program{}, err
			}
			dir = abs(dir, w)
			p.Ops = append(p.Ops, Op{Kind: OpWorkdir, Step: s, Dir: dir})
		case KindRun:
			op := Op{Kind: OpRun, Step: s, Dir: dir, Env: envList(scope())}
			if s.JSON {
				op.Argv = append([]string(nil), s.Args...)
			} else {
				op.Argv = []string{"/bin/sh", "-c", s.Args[0]}
			}
			p.Ops = append(p.Ops, op)
		case KindCopy:
			words := make([]string, len(s.Args))
			for i, a := range s.Args {
				w, err := word(a)
				if err != nil {
					return Program{}, err
				}
				words[i] = w
			}
			copies, err := resolveCopy(words[:len(words)-1], words[len(words)-1], dir, files)
			if err != nil {
				return Program{}, fail("%v", err)
			}
			for _, c := range copies {
				read[c.From] = true
			}
			p.Ops = append(p.Ops, Op{Kind: OpCopy, Step: s, Copies: copies})
		default:
			return Program{}, fail("unsupported instruction %s", s.Kind)
		}
	}
	for f := range read {
		p.ContextFiles = append(p.ContextFiles, f)
	}
	sort.Strings(p.ContextFiles)
	return p, nil
}

// resolveCopy turns COPY's sources and destination into context files and root paths. A
// source names a context file, a directory of them (its files keep their paths below it)
// or "." for all of them. The destination is a directory when it names one as buildkit
// reads it (see namesDir), when there are several sources or when a source is a directory.
func resolveCopy(srcs []string, dest, dir string, files map[string]bool) ([]Copy, error) {
	intoDir := namesDir(dest) || len(srcs) > 1
	dest = abs(dir, dest)
	if dest == "/" {
		intoDir = true // the root is always a folder: a file written over it would fail the build
	}
	type match struct{ from, rel string }
	var matches []match
	for _, src := range srcs {
		if strings.ContainsAny(src, "*?[") {
			return nil, fmt.Errorf("COPY %s: wildcards are not supported; name the file or its directory", src)
		}
		clean := path.Clean(src)
		if path.IsAbs(src) || clean == ".." || strings.HasPrefix(clean, "../") {
			return nil, fmt.Errorf("COPY %s: sources are paths in spec.context, relative and inside it", src)
		}
		if files[clean] {
			matches = append(matches, match{clean, path.Base(clean)})
			continue
		}
		prefix := clean + "/"
		if clean == "." {
			prefix = ""
		}
		var under []match
		for f := range files {
			if strings.HasPrefix(f, prefix) {
				under = append(under, match{f, strings.TrimPrefix(f, prefix)})
			}
		}
		if len(under) == 0 {
			return nil, fmt.Errorf("COPY %s: no such file in spec.context", src)
		}
		sort.Slice(under, func(i, j int) bool { return under[i].from < under[j].from })
		matches = append(matches, under...)
		intoDir = true
	}
	copies := make([]Copy, 0, len(matches))
	for _, m := range matches {
		to := dest
		if intoDir {
			to = path.Join(dest, m.rel)
		}
		copies = append(copies, Copy{From: m.from, To: to})
	}
	return copies, nil
}

// namesDir reports whether a COPY destination says it is a directory: it ends in "/" or
// "/.", or it is "." or empty (the working directory), as buildkit reads it, so that
// `COPY motd .` copies into the working directory instead of over it.
func namesDir(dest string) bool {
	return dest == "" || dest == "." || strings.HasSuffix(dest, "/") || strings.HasSuffix(dest, "/.")
}

// abs resolves p against the working directory dir.
func abs(dir, p string) string {
	if path.IsAbs(p) {
		return path.Clean(p)
	}
	return path.Join(dir, p)
}

func envList(v vars) []string {
	out := make([]string, 0, len(v))
	for _, k := range v.Keys() {
		out = append(out, k+"="+v[k])
	}
	return out
}

// validName accepts a shell variable name.
func validName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (i > 0 && r >= '0' && r <= '9') {
			continue
		}
		return false
	}
	return true
}
