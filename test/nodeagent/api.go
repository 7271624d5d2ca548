package nodeagent

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fieldManager names the agent in the objects' managedFields.
const fieldManager = "anvil-node-agent"

// Content types of the requests the agent sends.
const (
	contentJSON       = "application/json"
	contentMergePatch = "application/merge-patch+json"
)

// client speaks JSON to one apiserver as one identity: a bearer token (the bootstrap token)
// or a client certificate (the node's).
type client struct {
	server string
	http   *http.Client
	token  string
}

func newClient(server string, ca []byte, token string, cert *tls.Certificate) (*client, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, errors.New("--ca-file holds no PEM certificate")
	}
	tc := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if cert != nil {
		tc.Certificates = []tls.Certificate{*cert}
	}
	return &client{
		server: strings.TrimRight(server, "/"),
		token:  token,
		http:   &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tc, ForceAttemptHTTP2: true}},
	}, nil
}

// APIError is an answer of the apiserver other than 2xx: its code and its Status.
type APIError struct {
	Method, Path string
	Code         int
	Status       metav1.Status
}

func (e *APIError) Error() string {
	msg := e.Status.Message
	if msg == "" {
		msg = http.StatusText(e.Code)
	}
	return fmt.Sprintf("%s %s: %d %s", e.Method, e.Path, e.Code, msg)
}

// codeOf is err's HTTP status code, 0 when it is no APIError (the apiserver was not reached).
func codeOf(err error) int {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Code
	}
	return 0
}

// transient reports whether err may go away by itself: the apiserver unreachable, busy or
// failing, as opposed to a refusal that will be given again, or a serving certificate the
// agent does not trust.
func transient(err error) bool {
	if untrusted(err) {
		return false
	}
	c := codeOf(err)
	return c == 0 || c == http.StatusTooManyRequests || c >= 500
}

// untrusted reports whether err is the apiserver's certificate failing verification.
func untrusted(err error) bool {
	var host x509.HostnameError
	var authority x509.UnknownAuthorityError
	var invalid x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError
	return errors.As(err, &host) || errors.As(err, &authority) || errors.As(err, &invalid) || errors.As(err, &verify)
}

// do sends in (JSON, nil for none) with contentType and decodes a 2xx answer into out (nil
// to drop it).
func (c *client) do(ctx context.Context, method, path, contentType string, in, out any) error {
	var body io.Reader
	if in != nil {
		raw, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(raw)
	}
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	url := c.server + path
	if method != http.MethodGet {
		url += sep + "fieldManager=" + fieldManager
	}
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", contentJSON)
	req.Header.Set("User-Agent", fieldManager)
	if in != nil {
		req.Header.Set("Content-Type", contentType)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		e := &APIError{Method: method, Path: path, Code: resp.StatusCode}
		_ = json.Unmarshal(raw, &e.Status) // a 401 from the authenticator is a Status too; else the code says enough
		return e
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s %s: decoding the answer: %w", method, path, err)
	}
	return nil
}
