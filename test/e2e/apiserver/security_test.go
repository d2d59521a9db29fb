package apiserver_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/test/e2e/framework"
)

// TestEtcdMutualTLS: the embedded etcd answers only clients that present
// a certificate of etcd's own CA. Plain HTTP, TLS without a certificate
// and a certificate of the cluster CA (which every component's kubeconfig
// holds) are all refused; the API server's etcd client certificate works.
func TestEtcdMutualTLS(t *testing.T) {
	s := framework.StartAPIServer(t) // its own: it reads etcd's ports and keys in the data directory
	port, _ := framework.EtcdPorts(t, s.DataDir)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	pki := filepath.Join(s.DataDir, "pki")
	etcdCA := filepath.Join(pki, "etcd", "ca.crt")
	adminCert, adminKey := clientPair(t, s)

	cases := []struct {
		name   string
		scheme string
		tls    *tls.Config
		ok     bool
	}{
		{"plain HTTP", "http", nil, false},
		{"TLS, no client certificate", "https", framework.TLSConfig(t, etcdCA, "", ""), false},
		{"cluster CA's admin certificate", "https", framework.TLSConfig(t, etcdCA, adminCert, adminKey), false},
		{"API server's etcd client certificate", "https", framework.TLSConfig(t, etcdCA,
			filepath.Join(pki, "apiserver-etcd-client.crt"), filepath.Join(pki, "apiserver-etcd-client.key")), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: c.tls}}
			resp, err := hc.Get(c.scheme + "://" + addr + "/version")
			body := ""
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				body = string(b)
			}
			served := err == nil && resp.StatusCode == http.StatusOK && strings.Contains(body, "etcdserver")
			if served != c.ok {
				t.Errorf("served=%v, want %v (err %v, body %q)", served, c.ok, err, body)
			}
		})
	}
}

// TestExternalEtcdTLS: with --etcd-servers and kube-apiserver's
// --etcd-cafile, --etcd-certfile and --etcd-keyfile, the API server
// stores in an etcd that requires mutual TLS (here a member started by
// the test with the same certificates layout as kubeadm's).
func TestExternalEtcdTLS(t *testing.T) {
	s := framework.StartAPIServer(t, framework.StartEtcd(t).APIServerArgs()...)
	ctx2 := framework.Context(t, 30*time.Second)
	if _, err := s.Client().CoreV1().ConfigMaps("default").Create(ctx2, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "stored"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(s.DataDir, "etcd")); err == nil {
		t.Error("an embedded etcd was started beside the external one")
	}
}

// TestDataDirPrivate: nothing in the API server's data directory —
// etcd's data, keys, kubeconfigs, tokens — is readable by other users.
func TestDataDirPrivate(t *testing.T) {
	s := framework.StartAPIServer(t) // its own: it walks the data directory
	err := filepath.WalkDir(s.DataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if perm := info.Mode().Perm(); perm&0o077 != 0 && info.Mode().Type() != fs.ModeSymlink {
			t.Errorf("%s is %v: open to other users", path, perm)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// clientPair writes the admin kubeconfig's client certificate to files.
func clientPair(t *testing.T, s *framework.APIServer) (string, string) {
	t.Helper()
	cfg := s.Config("admin")
	if len(cfg.CertData) == 0 {
		t.Fatal("the admin kubeconfig has no client certificate")
	}
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "admin.crt"), filepath.Join(dir, "admin.key")
	if err := os.WriteFile(certFile, cfg.CertData, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, cfg.KeyData, 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// rawSecret is the value etcd holds for a Secret, read past the API server.
func rawSecret(t *testing.T, s *framework.APIServer, name string) []byte {
	t.Helper()
	return framework.EtcdGet(t, s.DataDir, "/registry/secrets/default/"+name)
}

func encryptionConfig(t *testing.T, path, provider string, keys ...string) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n  - resources: [secrets]\n    providers:\n")
	if provider == "identity" {
		b.WriteString("      - identity: {}\n")
	} else {
		fmt.Fprintf(&b, "      - %s:\n          keys:\n", provider)
		for _, k := range keys {
			fmt.Fprintf(&b, "            - name: %s\n              secret: %s\n", k, keyOf(k))
		}
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

var (
	keysMu sync.Mutex
	keys   = map[string]string{}
)

// keyOf is a random 32-byte key, the same for a name within the test run.
func keyOf(name string) string {
	keysMu.Lock()
	defer keysMu.Unlock()
	if k, ok := keys[name]; ok {
		return k
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	keys[name] = base64.StdEncoding.EncodeToString(b)
	return keys[name]
}

const plainText = "svcnet-secret-plain-text"

// TestEncryptionAtRest: with --encryption-provider-config a Secret's value
// in etcd carries the provider's prefix and not the plain text, for each
// of kube-apiserver's local providers; identity stores it as it is.
func TestEncryptionAtRest(t *testing.T) {
	for _, provider := range []string{"aescbc", "aesgcm", "secretbox", "identity"} {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			config := filepath.Join(dir, "encryption.yaml")
			encryptionConfig(t, config, provider, "key1")
			s := framework.StartAPIServer(t, "--encryption-provider-config", config)
			createSecret(t, s.Client(), "db")
			raw := rawSecret(t, s, "db")
			if provider == "identity" {
				if !strings.Contains(string(raw), plainText) {
					t.Errorf("identity: the plain text is not in etcd: %q", raw)
				}
				return
			}
			if want := "k8s:enc:" + provider + ":v1:key1:"; !strings.HasPrefix(string(raw), want) {
				t.Errorf("stored value starts %q, want %q", head(raw), want)
			}
			if strings.Contains(string(raw), plainText) {
				t.Error("the plain text is in etcd")
			}
			got, err := s.Client().CoreV1().Secrets("default").Get(framework.Context(t, 10*time.Second), "db", metav1.GetOptions{})
			if err != nil || string(got.Data["password"]) != plainText {
				t.Errorf("read back: %v %q", err, got.Data["password"])
			}
		})
	}
}

// TestEncryptionKeyRotation follows Kubernetes' rotation procedure: add
// the new key second, then first (old Secrets still read, new writes use
// it), rewrite every Secret, then drop the old key.
func TestEncryptionKeyRotation(t *testing.T) {
	dir := t.TempDir()
	config := filepath.Join(dir, "encryption.yaml")
	encryptionConfig(t, config, "aescbc", "old")
	s := framework.StartAPIServer(t, "--encryption-provider-config", config)
	createSecret(t, s.Client(), "db")

	encryptionConfig(t, config, "aescbc", "new", "old")
	s.Restart()
	client := s.Client()
	ctx := framework.Context(t, 30*time.Second)
	sec, err := client.CoreV1().Secrets("default").Get(ctx, "db", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("a Secret under the old key does not read with the new key first: %v", err)
	}
	if raw := rawSecret(t, s, "db"); !strings.HasPrefix(string(raw), "k8s:enc:aescbc:v1:old:") {
		t.Errorf("before the rewrite: %q, want the old key", head(raw))
	}
	// kubectl get secrets -A -o json | kubectl replace -f -: a rewrite.
	if _, err := client.CoreV1().Secrets("default").Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if raw := rawSecret(t, s, "db"); !strings.HasPrefix(string(raw), "k8s:enc:aescbc:v1:new:") {
		t.Errorf("after the rewrite: %q, want the new key", head(raw))
	}

	encryptionConfig(t, config, "aescbc", "new")
	s.Restart()
	got, err := s.Client().CoreV1().Secrets("default").Get(ctx, "db", metav1.GetOptions{})
	if err != nil || string(got.Data["password"]) != plainText {
		t.Errorf("with the old key gone: %v %q", err, got.Data["password"])
	}
}

func createSecret(t *testing.T, c kubernetes.Interface, name string) {
	t.Helper()
	_, err := c.CoreV1().Secrets("default").Create(framework.Context(t, 30*time.Second), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Data:       map[string][]byte{"password": []byte(plainText)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

func head(b []byte) string {
	if len(b) > 40 {
		b = b[:40]
	}
	return string(b)
}

// TestAuditLog: --audit-policy-file and --audit-log-path write JSON
// lines of audit.k8s.io/v1 Events at each rule's level: Metadata has no
// bodies, RequestResponse has both, None writes nothing.
func TestAuditLog(t *testing.T) {
	dir := t.TempDir()
	policy, log := filepath.Join(dir, "policy.yaml"), filepath.Join(dir, "audit.log")
	err := os.WriteFile(policy, []byte(`apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    resources: [{group: "", resources: [secrets]}]
  - level: RequestResponse
    resources: [{group: "", resources: [configmaps]}]
  - level: None
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	s := framework.StartAPIServer(t, "--audit-policy-file", policy, "--audit-log-path", log)
	client := s.Client()
	ctx := framework.Context(t, 30*time.Second)
	createSecret(t, client, "audited")
	_, err = client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "audited"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	s.Stop() // flushes the log

	type event struct {
		Kind, APIVersion, Level, Verb, Stage string
		User                                 struct{ Username string }
		ObjectRef                            struct{ Resource, Name string }
		RequestObject, ResponseObject        json.RawMessage
	}
	f, err := os.Open(log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[string]event{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("not a JSON line: %v: %s", err, sc.Text())
		}
		if e.Kind != "Event" || e.APIVersion != "audit.k8s.io/v1" {
			t.Errorf("line is %s %s", e.APIVersion, e.Kind)
		}
		if e.ObjectRef.Resource == "namespaces" {
			t.Errorf("a None rule was logged: %s", sc.Text())
		}
		if e.Verb == "create" && e.Stage == "ResponseComplete" {
			seen[e.ObjectRef.Resource] = e
		}
	}
	sec, ok := seen["secrets"]
	switch {
	case !ok:
		t.Error("no event for the Secret's creation")
	case sec.Level != "Metadata" || sec.RequestObject != nil || sec.ResponseObject != nil || sec.User.Username != "kubernetes-admin":
		t.Errorf("secret event: level %s user %s request %s", sec.Level, sec.User.Username, sec.RequestObject)
	}
	cm, ok := seen["configmaps"]
	switch {
	case !ok:
		t.Error("no event for the ConfigMap's creation")
	case cm.Level != "RequestResponse" || !strings.Contains(string(cm.RequestObject), `"k":"v"`) || cm.ResponseObject == nil:
		t.Errorf("configmap event: level %s request %s response %s", cm.Level, cm.RequestObject, cm.ResponseObject)
	}
}

// TestMaxRequestsInFlight: beyond --max-requests-inflight the server
// answers 429 with Retry-After, as kube-apiserver does, instead of
// queueing without bound; system:masters is exempt, as there.
func TestMaxRequestsInFlight(t *testing.T) {
	s := framework.StartAPIServer(t, "--max-requests-inflight", "1", "--max-mutating-requests-inflight", "1")
	// Raw requests: client-go would retry a 429 by itself.
	rt, err := rest.TransportFor(s.Config("viewer"))
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: rt, Timeout: 30 * time.Second}
	var tooMany, other atomic.Int32
	var retryAfter atomic.Value
	// Bounded: at most 20 rounds of 16 concurrent lists.
	for round := 0; round < 20 && tooMany.Load() == 0; round++ {
		var wg sync.WaitGroup
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := hc.Get(s.URL + "/api/v1/services")
				if err != nil {
					other.Add(1)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusTooManyRequests:
					tooMany.Add(1)
					retryAfter.Store(resp.Header.Get("Retry-After"))
				case http.StatusOK:
				default:
					other.Add(1)
				}
			}()
		}
		wg.Wait()
	}
	if v, _ := retryAfter.Load().(string); tooMany.Load() > 0 && v == "" {
		t.Error("a 429 without Retry-After")
	}
	if tooMany.Load() == 0 {
		t.Error("no 429 with one request allowed in flight and 16 at once")
	}
	if other.Load() > 0 {
		t.Errorf("%d requests failed otherwise than 429", other.Load())
	}
	// The admin (system:masters) is never throttled.
	if _, err := s.Client().CoreV1().Services("").List(context.Background(), metav1.ListOptions{}); err != nil {
		t.Errorf("admin: %v", err)
	}
}

// TestBadInputAnswered: malformed patches of every type, a patch that
// makes the patch library panic (found by FuzzPatches), a body over the
// size limit and garbage bodies each get an error answer, and the server
// goes on serving.
func TestBadInputAnswered(t *testing.T) {
	s := framework.SharedAPIServer(t)
	client := s.Client()
	ctx := framework.Context(t, 60*time.Second)
	ns := s.CreateNamespace("badinput-answered")
	if _, err := client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "target"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "target"}, AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{{Port: ptr.To[int32](80)}}}
	if _, err := client.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rt, err := rest.TransportFor(s.Config("admin"))
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: rt, Timeout: 30 * time.Second}
	big := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"big"},"data":{"k":"` + strings.Repeat("x", 4<<20) + `"}}`
	cases := []struct {
		name, method, path, contentType, body string
		want                                  []int
	}{
		{"JSON patch, not JSON", "PATCH", "/api/v1/namespaces/" + ns + "/configmaps/target", "application/json-patch+json", `[{"op":`, []int{400, 422}},
		{"JSON patch, bad op", "PATCH", "/api/v1/namespaces/" + ns + "/configmaps/target", "application/json-patch+json", `[{"op":"fly","path":"/x"}]`, []int{400, 422, 500}},
		{"merge patch, not an object", "PATCH", "/api/v1/namespaces/" + ns + "/configmaps/target", "application/merge-patch+json", `[1,2]`, []int{400, 422}},
		{"strategic patch, wrong types", "PATCH", "/api/v1/namespaces/" + ns + "/configmaps/target", "application/strategic-merge-patch+json", `{"data":[1]}`, []int{400, 422}},
		{"strategic patch that panics the library", "PATCH", "/apis/discovery.k8s.io/v1/namespaces/" + ns + "/endpointslices/target", "application/strategic-merge-patch+json",
			`{"$setElementOrder/ports":[{"port":81}],"ports":[{"port":81}]}`, []int{400}},
		{"apply patch, not YAML", "PATCH", "/api/v1/namespaces/" + ns + "/configmaps/target?fieldManager=t", "application/apply-patch+yaml", "\t: :\n\x00", []int{400, 422}},
		{"unknown patch type", "PATCH", "/api/v1/namespaces/" + ns + "/configmaps/target", "application/x-unknown", `{}`, []int{415}},
		{"body over 3 MiB", "POST", "/api/v1/namespaces/" + ns + "/configmaps", "application/json", big, []int{413}},
		{"garbage JSON", "POST", "/api/v1/namespaces/" + ns + "/configmaps", "application/json", "{\"metadata\":", []int{400}},
		{"garbage protobuf", "POST", "/api/v1/namespaces/" + ns + "/configmaps", "application/vnd.kubernetes.protobuf", "k8s\x00\xff\xff\xff", []int{400, 415}},
		{"wrong kind in body", "POST", "/api/v1/namespaces/" + ns + "/configmaps", "application/json", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`, []int{400}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest(c.method, s.URL+c.path, strings.NewReader(c.body))
			req.Header.Set("Content-Type", c.contentType)
			code, body := roundTrip(t, hc, req)
			if !slices.Contains(c.want, code) {
				t.Errorf("status %d, want one of %v: %.300s", code, c.want, body)
			}
			if code != http.StatusRequestEntityTooLarge && !strings.Contains(string(body), `"kind":"Status"`) {
				t.Errorf("the answer is not a Status: %.300s", body)
			}
		})
	}
	if _, err := client.CoreV1().ConfigMaps(ns).Get(ctx, "target", metav1.GetOptions{}); err != nil {
		t.Errorf("the server stopped serving: %v", err)
	}
}
