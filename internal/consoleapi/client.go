package consoleapi

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
)

// The client side, for anvil console: the user's own kubeconfig, through kube-apiserver.

func machinePath(ns, name, subresource string) string {
	return "/apis/" + Group + "/" + Version + "/namespaces/" + ns + "/machines/" + name + "/" + subresource
}

// LogOptions are machines/consolelog's parameters.
type LogOptions struct {
	Follow       bool
	TailLines    int64
	SinceSeconds int64
}

// ReadLog copies Machine ns/name's console log to out.
func ReadLog(ctx context.Context, cfg *rest.Config, ns, name string, o LogOptions, out io.Writer) error {
	body, err := OpenLog(ctx, cfg, ns, name, o)
	if err != nil {
		return err
	}
	defer body.Close()
	_, err = io.Copy(out, body)
	return err
}

// OpenLog opens Machine ns/name's console log; a refusal is the status the console server
// answered (MRIError reads it).
func OpenLog(ctx context.Context, cfg *rest.Config, ns, name string, o LogOptions) (io.ReadCloser, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	req := cs.CoreV1().RESTClient().Get().AbsPath(machinePath(ns, name, "consolelog"))
	if o.Follow {
		req = req.Param("follow", "true")
	}
	if o.TailLines > 0 {
		req = req.Param("tailLines", strconv.FormatInt(o.TailLines, 10))
	}
	if o.SinceSeconds > 0 {
		req = req.Param("sinceSeconds", strconv.FormatInt(o.SinceSeconds, 10))
	}
	return req.Stream(ctx)
}

// Attach connects in and out to Machine ns/name's console (in nil: read only) until in
// ends, the console ends, or ctx does.
func Attach(ctx context.Context, cfg *rest.Config, ns, name string, in io.Reader, out io.Writer) error {
	url := strings.TrimSuffix(cfg.Host, "/") + machinePath(ns, name, "console") + "?stdin=" + strconv.FormatBool(in != nil)
	exec, err := remotecommand.NewWebSocketExecutor(cfg, "GET", url)
	if err != nil {
		return err
	}
	return exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: in, Stdout: out, Tty: true})
}

// EscapeByte ends an attached session when typed (Ctrl-]), as telnet's and virtctl's do.
const EscapeByte = 0x1d

// UntilEscape reads r until EscapeByte, which it does not pass on.
func UntilEscape(r io.Reader) io.Reader { return &untilEscape{r: r} }

type untilEscape struct {
	r    io.Reader
	done bool
}

func (u *untilEscape) Read(p []byte) (int, error) {
	if u.done {
		return 0, io.EOF
	}
	n, err := u.r.Read(p)
	if i := bytes.IndexByte(p[:n], EscapeByte); i >= 0 {
		u.done = true
		if i == 0 {
			return 0, io.EOF
		}
		return i, nil
	}
	return n, err
}

// EscapeHint is said before attaching.
var EscapeHint = fmt.Sprintf("attached; Ctrl-] (0x%02x) ends the session", EscapeByte)
