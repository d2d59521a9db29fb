package convertcmd

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/svcnet/svcnet/internal/cliflags"
)

func TestOptions(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Options)
		errs   []string
	}{
		{"a file", func(o *Options) { o.Files = []string{"a.yaml", "-"} }, nil},
		{"the cluster", func(o *Options) { o.FromCluster, o.AllNamespaces, o.Kubeconfig = true, true, "/k" }, nil},
		{"no source", func(*Options) {}, []string{"give the Ingresses with -f FILE (- for stdin) or --from-cluster"}},
		{"two sources", func(o *Options) { o.Files, o.FromCluster = []string{"a"}, true }, []string{"-f and --from-cluster are two sources"}},
		{"-n and -A", func(o *Options) { o.FromCluster, o.Namespace, o.AllNamespaces = true, "x", true }, []string{"-n and -A: give one"}},
		{"-A with files", func(o *Options) { o.Files, o.AllNamespaces = []string{"a"}, true }, []string{"-A reads every namespace of the cluster"}},
		{"a kubeconfig with files", func(o *Options) { o.Files, o.Kubeconfig = []string{"a"}, "/k" }, []string{"--kubeconfig is for --from-cluster"}},
		{"stdin twice", func(o *Options) { o.Files = []string{"-", "a", "-"} }, []string{"-f - twice"}},
		{"an empty file name", func(o *Options) { o.Files = []string{""} }, []string{"-f: an empty file name"}},
		{"bad namespaces", func(o *Options) { o.Files, o.Namespace, o.GatewayNamespace = []string{"a"}, "A", "b.c" }, []string{`--namespace "A"`, `--gateway-namespace "b.c"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := Defaults()
			tt.change(&o)
			err := o.validate()
			if len(tt.errs) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			for _, want := range tt.errs {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("err %v, want %q", err, want)
				}
			}
		})
	}
}

func TestArgs(t *testing.T) {
	if err := cliflags.RoundTrip(Defaults, (*Options).AddFlags); err != nil {
		t.Error(err)
	}
}

const manifest = `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: web
  annotations:
    nginx.ingress.kubernetes.io/proxy-body-size: 8m
spec:
  rules:
  - host: web.example.com
    http:
      paths:
      - path: /
        pathType: Prefix
        backend:
          service:
            name: web
            port:
              name: http
---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  ports:
  - name: http
    port: 8080
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
`

func TestRunFiles(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "in.yaml")
	if err := os.WriteFile(file, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		o       Options
		stdin   string
		out     []string // substrings of stdout
		stderr  string
		err     string
		outFree bool
	}{
		{
			name: "a file",
			o:    Options{Files: []string{file}, Namespace: "apps"},
			out:  []string{"kind: Gateway", "namespace: apps", "- name: web\n      port: 8080", "# not carried over: nginx.ingress.kubernetes.io/proxy-body-size on apps/web"},
			stderr: "skipped: ConfigMap settings: not an Ingress or a Service\n" +
				"not carried over: nginx.ingress.kubernetes.io/proxy-body-size on apps/web: the Gateway API has no request-body limit\n",
		},
		{
			name:  "stdin and a Gateway of its own",
			o:     Options{Files: []string{"-"}, GatewayClass: "edge", GatewayName: "public", GatewayNamespace: "gw"},
			stdin: manifest,
			out:   []string{"gatewayClassName: edge", "name: public\n  namespace: gw", "- default\n"},
		},
		{
			name:  "no Ingress",
			o:     Options{Files: []string{"-"}},
			stdin: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
			err:   "no networking.k8s.io/v1 Ingress in -",
		},
		{
			name: "no such file",
			o:    Options{Files: []string{filepath.Join(dir, "missing.yaml")}},
			err:  "missing.yaml: no such file or directory",
		},
		{
			name:  "not YAML",
			o:     Options{Files: []string{"-"}},
			stdin: "{",
			err:   "stdin: document 1",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := Defaults()
			o.Files, o.Namespace = tt.o.Files, tt.o.Namespace
			if tt.o.GatewayClass != "" {
				o.GatewayClass, o.GatewayName, o.GatewayNamespace = tt.o.GatewayClass, tt.o.GatewayName, tt.o.GatewayNamespace
			}
			var stdout, stderr bytes.Buffer
			err := run(t.Context(), o, env{stdin: strings.NewReader(tt.stdin), stdout: &stdout, stderr: &stderr,
				client: func(string) (kubernetes.Interface, string, error) { return nil, "", errors.New("no cluster") }})
			if settled(t, err, tt.err) {
				return
			}
			hasAll(t, stdout.String(), tt.out)
			if tt.stderr != "" && stderr.String() != tt.stderr {
				t.Errorf("stderr:\n%s\nwant:\n%s", stderr.String(), tt.stderr)
			}
		})
	}
}

func clusterIngress(ns, name, port string) *networkingv1.Ingress {
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	backend := networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: name, Port: networkingv1.ServiceBackendPort{Name: port}}}
	prefix := networkingv1.PathTypePrefix
	ing.Spec.Rules = []networkingv1.IngressRule{{Host: name + ".example.com", IngressRuleValue: networkingv1.IngressRuleValue{
		HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &prefix, Backend: backend}}}}}}
	return ing
}

func clusterService(ns, name string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 8080, TargetPort: intstr.FromInt32(80)}}}}
}

func TestRunCluster(t *testing.T) {
	objects := []runtime.Object{clusterIngress("a", "one", "http"), clusterService("a", "one"), clusterIngress("b", "two", "http"), clusterService("b", "two")}
	tests := []struct {
		name      string
		o         Options
		contextNS string
		forbid    string // a resource the client may not list
		out       []string
		err       string
	}{
		{name: "the context's namespace", contextNS: "a", o: Options{}, out: []string{"name: one\n  namespace: a", "port: 8080"}},
		{name: "-n", contextNS: "a", o: Options{Namespace: "b"}, out: []string{"name: two\n  namespace: b"}},
		{name: "-A", o: Options{AllNamespaces: true, GatewayNamespace: "gw"}, out: []string{"name: one\n  namespace: a", "name: two\n  namespace: b", "namespace: gw"}},
		{name: "-A without a Gateway namespace", o: Options{AllNamespaces: true}, err: "the Ingresses are in namespaces a, b"},
		{name: "an empty namespace", o: Options{Namespace: "c"}, err: "no Ingresses in namespace c"},
		{name: "Services not to be listed", o: Options{Namespace: "a"}, forbid: "services", err: "list Services (for the Ingresses' named ports): forbidden"},
		{name: "Ingresses not to be listed", o: Options{Namespace: "a"}, forbid: "ingresses", err: "list Ingresses: forbidden"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(objects...)
			if tt.forbid != "" {
				client.PrependReactor("list", tt.forbid, func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, errors.New("forbidden")
				})
			}
			o := Defaults()
			o.FromCluster, o.Kubeconfig, o.Namespace, o.AllNamespaces, o.GatewayNamespace = true, "/k", tt.o.Namespace, tt.o.AllNamespaces, tt.o.GatewayNamespace
			var stdout, stderr bytes.Buffer
			err := run(t.Context(), o, env{stdout: &stdout, stderr: &stderr, client: func(k string) (kubernetes.Interface, string, error) {
				if k != "/k" {
					t.Errorf("kubeconfig %q", k)
				}
				return client, tt.contextNS, nil
			}})
			if settled(t, err, tt.err) {
				return
			}
			hasAll(t, stdout.String(), tt.out)
			if stderr.Len() != 0 {
				t.Errorf("stderr: %s", stderr.String())
			}
		})
	}
}

// settled checks a case's error against want (an expected message part,
// or "" for none) and says whether the case ends there.
func settled(t *testing.T, err error, want string) bool {
	t.Helper()
	if want != "" {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("err %v, want %q", err, want)
		}
		return true
	}
	if err != nil {
		t.Fatal(err)
	}
	return false
}

// hasAll checks that out holds every one of want.
func hasAll(t *testing.T, out string, want []string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("stdout has no %q:\n%s", w, out)
		}
	}
}
