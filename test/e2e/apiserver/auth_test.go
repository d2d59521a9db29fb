package apiserver_test

import (
	"context"
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
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/svcnet/svcnet/test/e2e/framework"
)

func TestAuthentication(t *testing.T) {
	s := framework.SharedAPIServer(t)
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
	s := framework.SharedAPIServer(t)
	ctx := framework.Context(t, time.Minute)
	admin := s.Client()
	ns := s.CreateNamespace("authz")
	if _, err := admin.CoreV1().Services(ns).Create(ctx, nodePortService("viewed"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The viewer (a bearer token) reads but does not write, nor read Secrets.
	viewer, err := kubernetes.NewForConfig(s.Config("viewer"))
	if err != nil {
		t.Fatal(err)
	}
	if l, err := viewer.CoreV1().Services(ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("viewer list services: %v", err)
	} else if len(l.Items) != 1 {
		t.Errorf("viewer lists %d services, want 1", len(l.Items))
	}
	if err := viewer.CoreV1().Services(ns).Delete(ctx, "viewed", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("viewer delete: %v, want Forbidden", err)
	}
	if _, err := viewer.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("viewer list secrets: %v, want Forbidden", err)
	}

	// A node writes its own Node and the status of its own pods only.
	// Node names of the test's own: Nodes are cluster-scoped.
	nodeA, nodeB := framework.UniqueName("e2e-authz-node-a"), framework.UniqueName("e2e-authz-node-b")
	t.Cleanup(func() {
		for _, n := range []string{nodeA, nodeB} {
			_ = admin.CoreV1().Nodes().Delete(context.Background(), n, metav1.DeleteOptions{})
		}
	})
	node := s.ClientAs("system:node:"+nodeA, "system:nodes")
	if _, err := node.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeA}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("node creates itself: %v", err)
	}
	if _, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeB}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	other, _ := node.CoreV1().Nodes().Get(ctx, nodeB, metav1.GetOptions{})
	other.Labels = map[string]string{"hijacked": "yes"}
	if _, err := node.CoreV1().Nodes().Update(ctx, other, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("%s updates %s: %v, want Forbidden", nodeA, nodeB, err)
	}
	for _, p := range []struct{ name, node string }{{"mine", nodeA}, {"theirs", nodeB}} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.name},
			Spec: corev1.PodSpec{NodeName: p.node, Containers: []corev1.Container{{Name: "c", Image: "svcnet/echo"}}}}
		if _, err := admin.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []struct {
		name      string
		forbidden bool
	}{{"mine", false}, {"theirs", true}} {
		pod, err := node.CoreV1().Pods(ns).Get(ctx, p.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pod.Status.Phase = corev1.PodRunning
		_, err = node.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		if p.forbidden != apierrors.IsForbidden(err) || (!p.forbidden && err != nil) {
			t.Errorf("%s updates status of pod %s: %v (forbidden expected: %v)", nodeA, p.name, err, p.forbidden)
		}
	}
	if _, err := node.CoreV1().Services(ns).Create(ctx, nodePortService("by-node"), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("node creates a service: %v, want Forbidden", err)
	} else if !strings.Contains(err.Error(), `User "system:node:`+nodeA+`" cannot create resource "services"`) {
		t.Errorf("forbidden message does not say who and what: %v", err)
	}
}

// TestBindingBeforeItsRole: who may bind any role (system:masters, or the
// bind verb) may bind one that does not exist yet — a manifest's
// ClusterRole and binding created one right after the other, before the
// authorizer's cache has the role —, as kube-apiserver checks the verb
// first; anyone else is refused, the role being unknown.
func TestBindingBeforeItsRole(t *testing.T) {
	s := framework.SharedAPIServer(t)
	ctx := framework.Context(t, time.Minute)
	admin := s.Client()
	// Roles, bindings and users are cluster-wide: their names are the
	// test's own, and so is the role that never exists.
	u := framework.UniqueName("e2e-bind")
	notYet, notYetEither, writer, carol := u+"-not-yet", u+"-not-yet-either", u+"-binding-writer", u+"-carol"
	var bindings []string
	t.Cleanup(func() {
		for _, n := range bindings {
			_ = admin.RbacV1().ClusterRoleBindings().Delete(context.Background(), n, metav1.DeleteOptions{})
		}
		_ = admin.RbacV1().ClusterRoles().Delete(context.Background(), writer, metav1.DeleteOptions{})
	})
	binding := func(name, role string) *rbacv1.ClusterRoleBinding {
		bindings = append(bindings, u+"-"+name)
		return &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: u + "-" + name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: u + "-someone"}}}
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, binding("early", notYet), metav1.CreateOptions{}); err != nil {
		t.Errorf("system:masters binds a role not created yet: %v", err)
	}
	// carol may create bindings, not bind roles she does not hold.
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: writer},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"create"}, APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterrolebindings"}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b := binding("carol-writes-bindings", writer)
	b.Subjects[0].Name = carol
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	carolClient := s.ClientAs(carol)
	var last error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		_, last = carolClient.RbacV1().ClusterRoleBindings().Create(ctx, binding("carols", notYetEither), metav1.CreateOptions{})
		if last == nil || strings.Contains(last.Error(), "not found") {
			break // her own binding is in the cache: the refusal is the role's
		}
	}
	if !apierrors.IsForbidden(last) || !strings.Contains(last.Error(), `cannot bind ClusterRole "`+notYetEither+`"`) {
		t.Errorf("carol binds an unknown role: %v, want Forbidden naming the role", last)
	}
}
