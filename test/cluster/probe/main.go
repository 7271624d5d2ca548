// Command probe runs in test/cluster's Pods and prints what it could reach:
//
//	probe dial HOST:PORT   a TCP connection (3 s timeout), "dial HOST:PORT: connected" or the error
//	probe apiserver        the kubernetes Service, as the Pod's service account: "apiserver: user=NAME"
//	probe sleep            nothing, until killed (a Pod that stays Running)
//	probe write FILE       writes "probe" into FILE (a hostPath volume's), then sleeps
//	probe serve PORT       accepts TCP connections on PORT and closes them, until killed
//
// It always exits 0 once it has printed, so the Pod's phase says only that it ran.
package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"
)

const sa = "/var/run/secrets/kubernetes.io/serviceaccount/"

func main() {
	if len(os.Args) < 2 {
		fmt.Println("usage: probe dial HOST:PORT | probe apiserver")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "dial":
		c, err := net.DialTimeout("tcp", os.Args[2], 3*time.Second)
		if err != nil {
			fmt.Printf("dial %s: %v\n", os.Args[2], err)
			return
		}
		c.Close()
		fmt.Printf("dial %s: connected\n", os.Args[2])
	case "sleep":
		select {}
	case "write":
		if err := os.WriteFile(os.Args[2], []byte("probe"), 0o644); err != nil {
			fmt.Printf("write %s: %v\n", os.Args[2], err)
			os.Exit(1)
		}
		select {}
	case "serve":
		l, err := net.Listen("tcp", ":"+os.Args[2])
		if err != nil {
			fmt.Printf("serve: %v\n", err)
			os.Exit(1)
		}
		for {
			if c, err := l.Accept(); err == nil {
				c.Close()
			}
		}
	case "apiserver":
		user, err := whoami()
		if err != nil {
			fmt.Printf("apiserver: %v\n", err)
			return
		}
		fmt.Printf("apiserver: user=%s\n", user)
	}
}

// whoami asks the apiserver, through the kubernetes Service and trusting only the Pod's
// root CA, who the Pod's service-account token is.
func whoami() (string, error) {
	ca, err := os.ReadFile(sa + "ca.crt")
	if err != nil {
		return "", err
	}
	token, err := os.ReadFile(sa + "token")
	if err != nil {
		return "", err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	url := "https://" + net.JoinHostPort(os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")) + "/apis/authentication.k8s.io/v1/selfsubjectreviews"
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader([]byte(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`)))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+string(bytes.TrimSpace(token)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var review struct {
		Status struct {
			UserInfo struct {
				Username string `json:"username"`
			} `json:"userInfo"`
		} `json:"status"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&review); err != nil {
		return "", fmt.Errorf("%s: %w", resp.Status, err)
	}
	return review.Status.UserInfo.Username, nil
}
