package apiserver_test

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/svcnet/svcnet/internal/pki"
	"github.com/svcnet/svcnet/test/e2e/framework"
)

func TestAuthentication(t *testing.T) {
	s := framework.StartAPIServer(t)
	ca, err := os.ReadFile(filepath.Join(s.DataDir, "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	anon := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	cases := []struct {
		path string
		code int
	}{
		{"/api/v1/namespaces/default/services", http.StatusUnauthorized},
		{"/apis", http.StatusUnauthorized},
		{"/metrics", http.StatusUnauthorized},
		{"/healthz", http.StatusOK},
		{"/readyz", http.StatusOK},
		{"/livez", http.StatusOK},
		{"/version", http.StatusOK},
	}
	for _, c := range cases {
		resp, err := anon.Get(s.URL + c.path)
		if err != nil {
			t.Fatalf("GET %s: %v", c.path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.code {
			t.Errorf("anonymous GET %s: %d, want %d: %s", c.path, resp.StatusCode, c.code, body)
		}
		if c.code == http.StatusUnauthorized && !strings.Contains(string(body), `"kind":"Status"`) {
			t.Errorf("401 without a Status body: %s", body)
		}
	}
	// A bearer token that is not in the token file is rejected.
	req, _ := http.NewRequest("GET", s.URL+"/api/v1/namespaces", nil)
	req.Header.Set("Authorization", "Bearer not-a-token")
	resp, err := anon.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("bad token: %d, want 401", resp.StatusCode)
	}
	// The admin kubeconfig's client certificate may read the metrics.
	adminCfg := s.Config("admin")
	tlsCfg, err := rest.TLSConfigFor(adminCfg)
	if err != nil {
		t.Fatal(err)
	}
	admin := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	resp, err = admin.Get(s.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(metrics), "apiserver_request_total") {
		t.Errorf("/metrics as admin: %d, %d bytes", resp.StatusCode, len(metrics))
	}
}

func TestAuthorization(t *testing.T) {
	s := framework.StartAPIServer(t)
	ctx := framework.Context(t, time.Minute)
	admin := s.Client()

	// The viewer (a bearer token) reads but does not write, nor read Secrets.
	viewer, err := kubernetes.NewForConfig(s.Config("viewer"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := viewer.CoreV1().Services("default").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("viewer list services: %v", err)
	}
	if err := viewer.CoreV1().Services("default").Delete(ctx, "kubernetes", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("viewer delete: %v, want Forbidden", err)
	}
	if _, err := viewer.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("viewer list secrets: %v, want Forbidden", err)
	}

	// A node writes its own Node and the status of its own pods only.
	ca, err := pki.LoadCA(filepath.Join(s.DataDir, "pki"))
	if err != nil {
		t.Fatal(err)
	}
	cred, err := ca.ClientCredentials("system:node:node-a", "system:nodes")
	if err != nil {
		t.Fatal(err)
	}
	nodeCfg := rest.CopyConfig(s.Config("admin"))
	nodeCfg.CertData, nodeCfg.KeyData = cred.CertPEM, cred.KeyPEM
	node, err := kubernetes.NewForConfig(nodeCfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := node.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("node creates itself: %v", err)
	}
	if _, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-b"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	other, _ := node.CoreV1().Nodes().Get(ctx, "node-b", metav1.GetOptions{})
	other.Labels = map[string]string{"hijacked": "yes"}
	if _, err := node.CoreV1().Nodes().Update(ctx, other, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("node-a updates node-b: %v, want Forbidden", err)
	}
	for _, p := range []struct{ name, node string }{{"mine", "node-a"}, {"theirs", "node-b"}} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.name},
			Spec: corev1.PodSpec{NodeName: p.node, Containers: []corev1.Container{{Name: "c", Image: "svcnet/echo"}}}}
		if _, err := admin.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []struct {
		name      string
		forbidden bool
	}{{"mine", false}, {"theirs", true}} {
		pod, err := node.CoreV1().Pods("default").Get(ctx, p.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pod.Status.Phase = corev1.PodRunning
		_, err = node.CoreV1().Pods("default").UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		if p.forbidden != apierrors.IsForbidden(err) || (!p.forbidden && err != nil) {
			t.Errorf("node-a updates status of pod %s: %v (forbidden expected: %v)", p.name, err, p.forbidden)
		}
	}
	if _, err := node.CoreV1().Services("default").Create(ctx, nodePortService("by-node"), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("node creates a service: %v, want Forbidden", err)
	} else if !strings.Contains(err.Error(), `User "system:node:node-a" cannot create resource "services"`) {
		t.Errorf("forbidden message does not say who and what: %v", err)
	}
}
