package apiserver_test

import (
	"encoding/json"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/test/e2e/framework"
)

// TestDiscoveryAndOpenAPI: kubectl finds every served kind and explains
// them from the served OpenAPI schemas; tables have kube-apiserver's columns.
func TestDiscoveryAndOpenAPI(t *testing.T) {
	s := framework.StartAPIServer(t) // its own: discovery lists what other tests' CRDs would change, and it reads all the logs
	// The server and the CRD server behind it register each health
	// check path once.
	defer func() {
		if logs := s.Logs(); strings.Contains(logs, "duplicate path registration") {
			t.Errorf("the API server registered a path twice:\n%s", logs)
		}
	}()
	want := []string{"pods", "services", "endpoints", "nodes", "namespaces", "secrets", "configmaps", "events",
		"serviceaccounts", "deployments", "replicasets", "replicationcontrollers", "endpointslices", "ingresses", "ingressclasses", "leases"}
	for _, version := range framework.KubectlVersions {
		t.Run(version, func(t *testing.T) {
			k := framework.NewKubectl(t, version, s.Kubeconfig)
			out := k.MustRun("", "api-resources", "-o", "name")
			for _, r := range want {
				if !strings.Contains(out, r) {
					t.Errorf("api-resources lacks %s:\n%s", r, out)
				}
			}
			out = k.MustRun("", "explain", "service.spec.ports.targetPort")
			if !strings.Contains(out, "Number or name of the port to access on the pods targeted by the service") {
				t.Errorf("explain:\n%s", out)
			}
			out = k.MustRun("", "get", "svc,deploy", "-A")
			if !strings.Contains(out, "kubernetes") {
				t.Errorf("get across kinds:\n%s", out)
			}
		})
	}
	hc := rawClient(t, s)
	for _, path := range []string{"/openapi/v2", "/openapi/v3", "/openapi/v3/api/v1", "/openapi/v3/apis/apps/v1", "/api", "/apis", "/api/v1", "/apis/discovery.k8s.io/v1"} {
		resp, err := hc.Get(s.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d", path, resp.StatusCode)
		}
	}
	// Aggregated discovery, as kubectl ≥ 1.26 asks for it.
	req, _ := http.NewRequest("GET", s.URL+"/apis", nil)
	req.Header.Set("Accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
	_, body := roundTrip(t, hc, req)
	if !strings.Contains(string(body), `"kind":"APIGroupDiscoveryList"`) || !strings.Contains(string(body), "endpointslices") {
		t.Errorf("aggregated discovery: %.300s", body)
	}
	// Server-side tables.
	tables := map[string][]string{
		"/api/v1/namespaces/default/services":      {"Name", "Type", "Cluster-IP", "External-IP", "Port(s)", "Age", "Selector"},
		"/api/v1/namespaces":                       {"Name", "Status", "Age"},
		"/api/v1/namespaces/default/pods":          {"Name", "Ready", "Status", "Restarts", "Age", "IP", "Node", "Nominated Node", "Readiness Gates"},
		"/apis/apps/v1/deployments":                {"Name", "Ready", "Up-to-date", "Available", "Age", "Containers", "Images", "Selector"},
		"/apis/discovery.k8s.io/v1/endpointslices": {"Name", "AddressType", "Ports", "Endpoints", "Age"},
	}
	for path, cols := range tables {
		req, _ := http.NewRequest("GET", s.URL+path, nil)
		req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var table metav1.Table
		err = json.NewDecoder(resp.Body).Decode(&table)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("%s as Table: %v", path, err)
		}
		var got []string
		for _, c := range table.ColumnDefinitions {
			got = append(got, c.Name)
		}
		if strings.Join(got, ",") != strings.Join(cols, ",") {
			t.Errorf("%s columns %v, want %v", path, got, cols)
		}
	}
}

// TestCommandLine: a bad flag and an occupied port end with a clear message.
func TestCommandLine(t *testing.T) {
	bin := framework.Binary(t)
	out, err := exec.Command(bin, "apiserver", "--no-such-flag").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "unknown flag: --no-such-flag") {
		t.Errorf("bad flag: %v %s", err, out)
	}
	out, err = exec.Command(bin, "apiserver", "--data-dir", t.TempDir(), "--service-cluster-ip-range", "10.0.0.0/33").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "invalid service IP range") {
		t.Errorf("bad range: %v %s", err, out)
	}
	out, err = exec.Command(bin, "apiserver", "--data-dir", t.TempDir(), "--service-node-port-range", "9000-8000").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "invalid port range") {
		t.Errorf("bad port range: %v %s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	cmd := exec.Command(bin, "apiserver", "--data-dir", t.TempDir(), "--secure-port", strings.TrimPrefix(l.Addr().String(), "127.0.0.1:"))
	done := make(chan struct{})
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("server started on an occupied port")
	}
	if err == nil || !strings.Contains(string(out), "address already in use") {
		t.Errorf("occupied port %d: %v %s", port, err, out)
	}
}
