// Package ingress_test runs `svcnet ingress` against svcnet's API server,
// inside a network namespace with the pods it routes to, and drives it
// with kubectl and real HTTP clients.
package ingress_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/pki"
	"github.com/svcnet/svcnet/test/e2e/framework"
)

// The ingress and its pods share one namespace: the ingress on .1, pods
// from .11, all on its loopback, with no route anywhere else.
const (
	ingressIP = "10.77.0.1"
	podPort   = 8080
)

// env is one API server, one ingress and the pods it routes to.
type env struct {
	t       testing.TB
	api     *framework.APIServer
	client  kubernetes.Interface
	kubectl *framework.Kubectl
	ns      *framework.Netns
	ingress *framework.Process
	nextPod int
}

func newEnv(t testing.TB, args ...string) *env {
	t.Helper()
	e := newCluster(t)
	e.startIngress(args...)
	return e
}

// newCluster is an env before its ingress starts: the API server, the
// namespace, the IngressClass svcnet.
func newCluster(t testing.TB) *env {
	t.Helper()
	framework.RequireRoot(t)
	e := &env{t: t, nextPod: 11}
	e.api = framework.StartAPIServer(t)
	e.client = e.api.Client()
	e.kubectl = framework.NewKubectl(t, "1.33", e.api.KubeconfigOf("admin"))
	e.ns = framework.NewNetns(t, "ing")
	e.ns.IP("addr", "add", ingressIP+"/32", "dev", "lo")
	e.ns.ForwardAPIServer(e.api)
	e.kubectl.MustRun(`apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata:
  name: svcnet
  annotations:
    ingressclass.kubernetes.io/is-default-class: "true"
spec:
  controller: svcnet.dev/ingress
`, "apply", "-f", "-")
	return e
}

// startIngress starts the ingress with args after its own flags and
// waits until it is ready.
func (e *env) startIngress(args ...string) {
	e.t.Helper()
	all := append([]string{"ingress", "--kubeconfig", e.api.KubeconfigOf("ingress"),
		"--http-address", ingressIP + ":80", "--https-address", ingressIP + ":443",
		"--metrics-address", ingressIP + ":10254", "--proxy-read-timeout", "2s"}, args...)
	e.ingress = framework.StartProcessIn(e.t, e.ns, all...)
	e.eventually("the ingress is ready", func() error {
		return e.getOK(e.ns.HTTPClient(time.Second), "http://"+ingressIP+":10254/readyz", "")
	})
}

// programmedLease checks that the ingress says in its Lease (kube-system
// without POD_NAMESPACE, named after the host) that its endpoint sets
// reflect the slice ns/name, as node agents read it before they stop a
// pod (internal/programmed).
func (e *env) programmedLease(ns, slice string) {
	e.t.Helper()
	ctx := context.Background()
	s, err := e.client.DiscoveryV1().EndpointSlices(ns).Get(ctx, slice, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	want, _ := strconv.ParseUint(s.ResourceVersion, 10, 64)
	host, _ := os.Hostname()
	name := "svcnet-ingress-" + strings.ToLower(host)
	e.eventually("the ingress's Lease to reflect slice "+ns+"/"+slice, func() error {
		l, err := e.client.CoordinationV1().Leases("kube-system").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		got, _ := strconv.ParseUint(l.Annotations["svcnet.dev/endpointslices-programmed"], 10, 64)
		if l.Labels["svcnet.dev/endpointslice-consumer"] != "ingress" || got < want {
			return fmt.Errorf("Lease labels %v, watermark %d; want kind ingress and at least %d", l.Labels, got, want)
		}
		return nil
	})
}

// eventually retries fn for up to 15 s.
func (e *env) eventually(what string, fn func() error) {
	e.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: %v\ningress log:\n%s", what, err, e.ingress.Logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// pod starts an HTTP server on a new address of the namespace that
// answers as the named pod: {"pod", "path", "host", "headers"}.
func (e *env) pod(name string) string {
	e.t.Helper()
	ip := e.podIP()
	l := e.ns.Listen("tcp", fmt.Sprintf("%s:%d", ip, podPort))
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := map[string]string{}
		for k := range r.Header {
			h[k] = r.Header.Get(k)
		}
		_ = json.NewEncoder(w).Encode(answer{Pod: name, Path: r.URL.RequestURI(), Host: r.Host, Headers: h})
	})}
	go srv.Serve(l)
	e.t.Cleanup(func() { srv.Close() })
	return ip
}

// podIP gives a new pod address on the namespace's loopback.
func (e *env) podIP() string {
	ip := fmt.Sprintf("10.77.0.%d", e.nextPod)
	e.nextPod++
	e.ns.IP("addr", "add", ip+"/32", "dev", "lo")
	return ip
}

type answer struct {
	Pod     string
	Path    string
	Host    string
	Headers map[string]string
}

// service makes a Service with a port "http" 80 → 8080 and one
// EndpointSlice of the given pod addresses, ready, as the EndpointSlice
// controller would.
func (e *env) service(ns, name string, ips ...string) {
	e.t.Helper()
	ctx := context.Background()
	if ns != "default" {
		_, err := e.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			e.t.Fatal(err)
		}
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{
		Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}}
	if _, err := e.client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.endpoints(ns, name, ips...)
}

// hostIngress makes the Ingress name, which routes every path of host
// to port 80 of the Service service.
func (e *env) hostIngress(name, host, service string) {
	e.kubectl.MustRun(fmt.Sprintf(`apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: %s}
spec:
  rules:
  - host: %s
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: %s, port: {number: 80}}}}
`, name, host, service), "apply", "-f", "-")
}

// endpoints sets the Service's EndpointSlice to the given ready pods.
func (e *env) endpoints(ns, name string, ips ...string) {
	e.t.Helper()
	e.writeSlice(podSlice(ns, name, ips, nil))
}

// podSlice is the EndpointSlice of the Service ns/name on the pods' port
// "http": the pods at ready ready, those at terminating terminating (not
// ready, still serving).
func podSlice(ns, name string, ready, terminating []string) *discoveryv1.EndpointSlice {
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](podPort), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	add := func(ips []string, ready bool) {
		for _, ip := range ips {
			slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip},
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready), Serving: ptr.To(true), Terminating: ptr.To(!ready)}})
		}
	}
	add(ready, true)
	add(terminating, false)
	return slice
}

// writeSlice creates slice, or replaces it if it exists.
func (e *env) writeSlice(slice *discoveryv1.EndpointSlice) {
	e.t.Helper()
	ctx := context.Background()
	slices := e.client.DiscoveryV1().EndpointSlices(slice.Namespace)
	old, err := slices.Get(ctx, slice.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = slices.Create(ctx, slice, metav1.CreateOptions{})
	case err == nil:
		slice.ResourceVersion = old.ResourceVersion
		_, err = slices.Update(ctx, slice, metav1.UpdateOptions{})
	}
	if err != nil {
		e.t.Fatal(err)
	}
}

// get requests http://ingress<path> with a Host header and returns the
// status and the answer.
func (e *env) get(host, path string) (int, answer) {
	e.t.Helper()
	return e.do(e.ns.HTTPClient(5*time.Second), "http://"+ingressIP+path, host)
}

func (e *env) do(c *http.Client, url, host string) (int, answer) {
	e.t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Host = host
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Do(req)
	if err != nil {
		e.t.Fatalf("GET %s (Host %s): %v", url, host, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var a answer
	_ = json.Unmarshal(body, &a)
	if resp.StatusCode == http.StatusPermanentRedirect {
		a.Path = resp.Header.Get("Location")
	}
	return resp.StatusCode, a
}

// getOK is nil once c's GET of url, with the Host header host (when not
// empty), is answered 200, its body read.
func (e *env) getOK(c *http.Client, url, host string) error {
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		return err
	}
	if host != "" {
		req.Host = host
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// expect waits until host+path is answered with status by pod ("" for
// none).
func (e *env) expect(host, path string, status int, pod string) {
	e.t.Helper()
	e.eventually(fmt.Sprintf("%s%s answered %d by %q", host, path, status, pod), func() error {
		got, a := e.get(host, path)
		if got != status || a.Pod != pod {
			return fmt.Errorf("got %d by %q", got, a.Pod)
		}
		return nil
	})
}

// expectEvent waits for an event of reason on the named object whose
// message mentions what, read with kubectl.
func (e *env) expectEvent(object, reason, what string) {
	e.t.Helper()
	e.eventually("a "+reason+" event on "+object, func() error {
		out, _, _ := e.kubectl.Run("", "get", "events", "--field-selector", "involvedObject.name="+object+",reason="+reason, "-o", "jsonpath={.items[*].message}")
		if !strings.Contains(out, what) {
			return fmt.Errorf("events: %q", out)
		}
		return nil
	})
}

func TestIngress(t *testing.T) {
	e := newEnv(t, "--publish-service", "ingress-svcnet/ingress")
	e.service("default", "web", e.pod("web-1"))
	e.service("default", "api", e.pod("api-1"))
	e.service("default", "fallback", e.pod("fallback-1"))
	e.service("shop", "cart", e.pod("cart-1"))
	e.programmedLease("shop", "cart-1")
	e.kubectl.MustRun(`apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: site
spec:
  defaultBackend:
    service: {name: fallback, port: {name: http}}
  rules:
  - host: site.example
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
      - {path: /api, pathType: Prefix, backend: {service: {name: api, port: {name: http}}}}
      - {path: /api/exact, pathType: Exact, backend: {service: {name: web, port: {number: 80}}}}
  - host: "*.wild.example"
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: api, port: {number: 80}}}}
  - host: only.example
    http:
      paths:
      - {path: /only, pathType: Exact, backend: {service: {name: api, port: {number: 80}}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: cart
  namespace: shop
  annotations:
    kubernetes.io/ingress.class: svcnet
spec:
  rules:
  - host: site.example
    http:
      paths:
      - {path: /cart, pathType: Prefix, backend: {service: {name: cart, port: {number: 80}}}}
`, "apply", "-f", "-")

	t.Run("rules", func(t *testing.T) {
		for _, c := range []struct {
			host, path string
			status     int
			pod        string
		}{
			{"site.example", "/", 200, "web-1"},
			{"SITE.example:80", "/index.html?x=1", 200, "web-1"},
			{"site.example", "/api", 200, "api-1"},
			{"site.example", "/api/", 200, "api-1"},
			{"site.example", "/api/v1/items", 200, "api-1"},
			{"site.example", "/apis", 200, "web-1"},
			{"site.example", "/api/exact", 200, "web-1"},
			{"site.example", "/api/exact/more", 200, "api-1"},
			{"site.example", "/cart/items", 200, "cart-1"}, // merged from another namespace
			{"a.wild.example", "/x", 200, "api-1"},
			{"a.b.wild.example", "/x", 404, ""}, // not a host of the Ingress: its default does not apply
			{"only.example", "/elsewhere", 200, "fallback-1"},
			{"unknown.example", "/", 404, ""},
		} {
			e.expect(c.host, c.path, c.status, c.pod)
		}
		_, a := e.get("site.example", "/api/../cart/x?q=1")
		if a.Pod != "cart-1" || a.Path != "/cart/x?q=1" {
			t.Errorf("dot segments: %q got %q", a.Pod, a.Path)
		}
		_, a = e.get("site.example", "/")
		if a.Host != "site.example" || a.Headers["X-Forwarded-For"] != ingressIP || a.Headers["X-Forwarded-Host"] != "site.example" ||
			a.Headers["X-Forwarded-Proto"] != "http" || a.Headers["X-Forwarded-Port"] != "80" || len(a.Headers["X-Request-Id"]) != 32 {
			t.Errorf("what the pod received: host %q headers %v", a.Host, a.Headers)
		}
	})

	t.Run("endpoints change without a reload", func(t *testing.T) {
		web2 := e.pod("web-2")
		e.endpoints("default", "web", web2)
		e.expect("site.example", "/", 200, "web-2")
		e.endpoints("default", "web")
		e.expect("site.example", "/", 503, "")
		e.endpoints("default", "web", web2)
		e.expect("site.example", "/", 200, "web-2")
	})

	t.Run("a conflict goes to the oldest, the other gets an event", func(t *testing.T) {
		// Creation times have one-second resolution: within the same
		// second the name would decide.
		time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(1100 * time.Millisecond)))
		e.kubectl.MustRun(`apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: latecomer
spec:
  rules:
  - host: site.example
    http:
      paths:
      - {path: /api, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
      - {path: /late, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
`, "apply", "-f", "-")
		e.expect("site.example", "/late", 200, "web-2")
		e.expect("site.example", "/api", 200, "api-1")
		e.expectEvent("latecomer", "RouteConflict", "default/site")
	})

	t.Run("other classes are not served, nor their status touched", func(t *testing.T) {
		e.kubectl.MustRun(`apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: nginx}
spec: {controller: k8s.io/ingress-nginx}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: theirs}
spec:
  ingressClassName: nginx
  rules:
  - host: theirs.example
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
`, "apply", "-f", "-")
		e.expect("theirs.example", "/", 404, "")
		// Moved to our class, it is served; back, it is not.
		e.kubectl.MustRun("", "patch", "ingress", "theirs", "--type=merge", "-p", `{"spec":{"ingressClassName":"svcnet"}}`)
		e.expect("theirs.example", "/", 200, "web-2")
		e.kubectl.MustRun("", "patch", "ingress", "theirs", "--type=merge", "-p", `{"spec":{"ingressClassName":"nginx"}}`)
		e.expect("theirs.example", "/", 404, "")
	})

	t.Run("status from the publish service", func(t *testing.T) {
		ctx := context.Background()
		_, _ = e.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ingress-svcnet"}}, metav1.CreateOptions{})
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ingress-svcnet", Name: "ingress"}, Spec: corev1.ServiceSpec{
			Ports: []corev1.ServicePort{{Name: "http", Port: 80}}, ExternalIPs: []string{"192.0.2.80"}}}
		if _, err := e.client.CoreV1().Services("ingress-svcnet").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		status := func(name string) string {
			out, _, _ := e.kubectl.Run("", "get", "ingress", name, "-o", "jsonpath={.status.loadBalancer.ingress[*].ip}")
			return out
		}
		e.eventually("status of a served Ingress", func() error {
			if got := status("site"); got != "192.0.2.80" {
				return fmt.Errorf("site: %q", got)
			}
			return nil
		})
		if got := status("theirs"); got != "" {
			t.Errorf("status of another class's Ingress: %q", got)
		}
		// It follows the Service.
		e.kubectl.MustRun("", "-n", "ingress-svcnet", "patch", "service", "ingress", "--type=merge", "-p", `{"spec":{"externalIPs":["192.0.2.81"]}}`)
		e.eventually("status follows the publish service", func() error {
			if got := status("site"); got != "192.0.2.81" {
				return fmt.Errorf("site: %q", got)
			}
			return nil
		})
		// Leaving the class takes our status away.
		e.kubectl.MustRun("", "patch", "ingress", "latecomer", "--type=merge", "-p", `{"spec":{"ingressClassName":"nginx"}}`)
		e.eventually("status removed when the Ingress leaves the class", func() error {
			if got := status("latecomer"); got != "" {
				return fmt.Errorf("latecomer: %q", got)
			}
			return nil
		})
	})

	t.Run("TLS by SNI, HTTP/2, redirect", func(t *testing.T) {
		ca, err := pki.EnsureCA(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		crt, key, err := ca.Issue("secure.example", nil, []string{"secure.example"}, false)
		if err != nil {
			t.Fatal(err)
		}
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "secure-tls"}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key}}
		if _, err := e.client.CoreV1().Secrets("default").Create(context.Background(), secret, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		e.kubectl.MustRun(`apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: secure
spec:
  tls:
  - {hosts: [secure.example], secretName: secure-tls}
  - {hosts: [nocert.example], secretName: missing-tls}
  rules:
  - host: secure.example
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: api, port: {number: 80}}}}
  - host: nocert.example
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: api, port: {number: 80}}}}
`, "apply", "-f", "-")
		pool := x509.NewCertPool()
		pool.AddCert(ca.Cert)
		client := func(sni string) *http.Client {
			return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
				DialContext:       e.ns.DialContext,
				ForceAttemptHTTP2: true,
				TLSClientConfig:   &tls.Config{RootCAs: pool, ServerName: sni},
			}}
		}
		e.eventually("HTTPS to secure.example with a verified certificate over HTTP/2", func() error {
			req, _ := http.NewRequest("GET", "https://"+ingressIP+"/x", nil)
			req.Host = "secure.example"
			resp, err := client("secure.example").Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			var a answer
			_ = json.NewDecoder(resp.Body).Decode(&a)
			if resp.StatusCode != 200 || a.Pod != "api-1" || resp.ProtoMajor != 2 || a.Headers["X-Forwarded-Proto"] != "https" {
				return fmt.Errorf("%d over HTTP/%d from %q (%v)", resp.StatusCode, resp.ProtoMajor, a.Pod, a.Headers)
			}
			return nil
		})
		e.expect("secure.example", "/x?y=1", http.StatusPermanentRedirect, "")
		if _, a := e.get("secure.example", "/x?y=1"); a.Path != "https://secure.example/x?y=1" {
			t.Errorf("redirect to %q", a.Path)
		}
		// A missing Secret: the default certificate, which no client
		// trusts, and a Warning event.
		conn, err := e.ns.DialContext(context.Background(), "tcp", ingressIP+":443")
		if err != nil {
			t.Fatal(err)
		}
		tc := tls.Client(conn, &tls.Config{InsecureSkipVerify: true, ServerName: "nocert.example"})
		if err := tc.Handshake(); err != nil {
			t.Fatal(err)
		}
		if cn := tc.ConnectionState().PeerCertificates[0].Subject.CommonName; cn != "svcnet ingress default certificate" {
			t.Errorf("certificate for a host whose Secret is missing: %q", cn)
		}
		tc.Close()
		e.expectEvent("secure", "MissingSecret", "missing-tls")
		// The Secret appears: served without a restart.
		crt2, key2, _ := ca.Issue("nocert.example", nil, []string{"nocert.example"}, false)
		secret2 := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "missing-tls"}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{corev1.TLSCertKey: crt2, corev1.TLSPrivateKeyKey: key2}}
		if _, err := e.client.CoreV1().Secrets("default").Create(context.Background(), secret2, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		e.eventually("the new certificate is served", func() error {
			req, _ := http.NewRequest("GET", "https://"+ingressIP+"/", nil)
			req.Host = "nocert.example"
			resp, err := client("nocert.example").Do(req)
			if err != nil {
				return err
			}
			resp.Body.Close()
			return nil
		})
	})

	t.Run("upgrades and gRPC backends", func(t *testing.T) {
		// A pod that switches protocols and echoes lines, as a WebSocket
		// server would, and a gRPC-like pod speaking HTTP/2 without TLS.
		wsIP := e.podIP()
		wsL := e.ns.Listen("tcp", fmt.Sprintf("%s:%d", wsIP, podPort))
		go func() {
			for {
				c, err := wsL.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					br := bufio.NewReader(c)
					if _, err := http.ReadRequest(br); err != nil {
						return
					}
					fmt.Fprint(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
					for {
						line, err := br.ReadString('\n')
						if err != nil {
							return
						}
						fmt.Fprint(c, "echo "+line)
					}
				}()
			}
		}()
		grpcIP := e.podIP()
		grpcL := e.ns.Listen("tcp", fmt.Sprintf("%s:%d", grpcIP, podPort))
		grpcSrv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Trailer", "Grpc-Status")
			w.Header().Set("Content-Type", "application/grpc")
			fmt.Fprintf(w, "%s %s", r.Proto, r.URL.Path)
			w.Header().Set("Grpc-Status", "0")
		}), Protocols: new(http.Protocols)}
		grpcSrv.Protocols.SetUnencryptedHTTP2(true)
		go grpcSrv.Serve(grpcL)
		t.Cleanup(func() { grpcSrv.Close() })
		e.service("default", "ws", wsIP)
		e.service("default", "grpc", grpcIP)
		e.kubectl.MustRun(`apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: ws}
spec:
  rules:
  - host: streams.example
    http:
      paths:
      - {path: /ws, pathType: Prefix, backend: {service: {name: ws, port: {number: 80}}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: grpc
  annotations: {svcnet.dev/backend-protocol: GRPC}
spec:
  rules:
  - host: streams.example
    http:
      paths:
      - {path: /echo.Echo, pathType: Prefix, backend: {service: {name: grpc, port: {number: 80}}}}
`, "apply", "-f", "-")
		h2c := new(http.Protocols)
		h2c.SetUnencryptedHTTP2(true)
		grpcClient := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: e.ns.DialContext, Protocols: h2c}}
		e.eventually("a gRPC call over HTTP/2 without TLS, both ways", func() error {
			req, _ := http.NewRequest("POST", "http://"+ingressIP+"/echo.Echo/Say", strings.NewReader("\x00\x00\x00\x00\x00"))
			req.Host = "streams.example"
			req.Header.Set("Content-Type", "application/grpc")
			resp, err := grpcClient.Do(req)
			if err != nil {
				return err
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || resp.ProtoMajor != 2 || string(body) != "HTTP/2.0 /echo.Echo/Say" || resp.Trailer.Get("Grpc-Status") != "0" {
				return fmt.Errorf("%d over %s: %q, trailers %v", resp.StatusCode, resp.Proto, body, resp.Trailer)
			}
			return nil
		})
		c, err := e.ns.DialContext(context.Background(), "tcp", ingressIP+":80")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprint(c, "GET /ws HTTP/1.1\r\nHost: streams.example\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
		br := bufio.NewReader(c)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("upgrade: %v %v", resp, err)
		}
		for i := range 3 {
			fmt.Fprintf(c, "line %d\n", i)
			if got, err := br.ReadString('\n'); err != nil || got != fmt.Sprintf("echo line %d\n", i) {
				t.Fatalf("through the tunnel: %q %v", got, err)
			}
		}
		// The pod leaves the endpoints: the tunnel is closed.
		e.endpoints("default", "ws")
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := br.ReadString('\n'); err != io.EOF {
			t.Errorf("the tunnel to a pod that left: %v, want EOF", err)
		}
	})

	t.Run("bad requests", func(t *testing.T) {
		c, err := e.ns.DialContext(context.Background(), "tcp", ingressIP+":80")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: site.example\r\nX-Big: %s\r\n\r\n", strings.Repeat("x", 40<<10))
		buf := make([]byte, 64)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, _ := io.ReadAtLeast(c, buf, 12)
		if got := string(buf[:n]); !strings.HasPrefix(got, "HTTP/1.1 431") {
			t.Errorf("oversized headers: %q", got)
		}
		c2, err := e.ns.DialContext(context.Background(), "tcp", ingressIP+":80")
		if err != nil {
			t.Fatal(err)
		}
		defer c2.Close()
		fmt.Fprint(c2, "GARBAGE, NOT HTTP AT ALL\r\n\r\n")
		c2.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, _ = io.ReadAtLeast(c2, buf, 12)
		if got := string(buf[:n]); !strings.HasPrefix(got, "HTTP/1.1 400") {
			t.Errorf("malformed request: %q", got)
		}
	})
}
