package ui

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromium is Debian's headless Chromium (hack/install-deps.sh installs it).
const chromium = "/usr/bin/chromium-headless-shell"

// browser is one headless Chromium tab, ended with the test.
type browser struct {
	t   *testing.T
	ctx context.Context
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	if _, err := os.Stat(chromium); err != nil {
		t.Fatalf("%s: %v (make test installs chromium-headless-shell: hack/install-deps.sh)", chromium, err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium),
		chromedp.NoSandbox, // root in the test machine: Chromium's sandbox refuses to run as root
		chromedp.WindowSize(1280, 900), chromedp.UserDataDir(t.TempDir()))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // the first run starts the browser: no timeout on it
		t.Fatalf("starting %s: %v", chromium, err)
	}
	return &browser{t: t, ctx: ctx}
}

// do runs steps, failing the test on an error, within limit.
func (b *browser) do(limit time.Duration, what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, limit)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v\nthe page says:\n%s", what, err, b.text())
	}
}

// waitJS waits until the JavaScript expression is true on the page.
func (b *browser) waitJS(limit time.Duration, what, expr string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, limit)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(200*time.Millisecond))); err != nil {
		b.t.Fatalf("waiting for %s: %v\nthe page says:\n%s", what, err, b.text())
	}
}

// eval is the value of a JavaScript expression on the page (a promise's, awaited).
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("evaluating %s: %v\nthe page says:\n%s", expr, err, b.text())
	}
	return v
}

// text is the page's visible text, for failure messages.
func (b *browser) text() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
	if err != nil {
		return fmt.Sprintf("(unreadable: %v)", err)
	}
	return s
}

// open opens the page at hash (#/machines) without loading the document again.
func (b *browser) open(hash string) {
	b.t.Helper()
	b.do(10*time.Second, "opening "+hash, chromedp.Evaluate[chromedp.Void](fmt.Sprintf("location.hash = %q", hash)))
}

// screenshot saves the whole page as name.png among the test's artifacts (go test
// -artifacts keeps them; make test passes it), after checking the page shows no value
// drawn by mistake (an object, undefined, NaN).
func (b *browser) screenshot(name string) string {
	b.t.Helper()
	if text := b.text(); strings.Contains(text, "[object ") || strings.Contains(text, "undefined") || strings.Contains(text, "NaN") {
		b.t.Errorf("the %s page draws a value by mistake:\n%s", name, text)
	}
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(b.t.ArtifactDir(), name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot %s", path)
	return path
}
