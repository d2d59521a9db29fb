package cluster

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestParse(t *testing.T) {
	dir := t.TempDir()
	resolv := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(resolv, []byte("search corp.example lab.example\nnameserver 192.0.2.53\nnameserver 2001:db8::53\noptions ndots:2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.conf")
	if err := os.WriteFile(empty, []byte("search corp.example\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := func(f func(*Options)) Options {
		o := Defaults()
		o.Kubeconfig = "kc"
		o.Listen = "127.0.0.1:5353"
		o.ResolvConf = resolv
		f(&o)
		return o
	}
	cases := []struct {
		name       string
		opts       Options
		wantErr    string // substring; empty means success
		upstreams  []string
		hostSearch []string
	}{
		{name: "resolv.conf upstreams", opts: base(func(*Options) {}),
			upstreams: []string{"192.0.2.53:53", "[2001:db8::53]:53"}, hostSearch: []string{"corp.example", "lab.example"}},
		{name: "flags win over resolv.conf", opts: base(func(o *Options) { o.Upstreams = []string{"127.0.0.1:1053", "::1", "10.0.0.1"} }),
			upstreams: []string{"127.0.0.1:1053", "[::1]:53", "10.0.0.1:53"}, hostSearch: []string{"corp.example", "lab.example"}},
		{name: "missing resolv.conf is fine with upstreams", opts: base(func(o *Options) {
			o.Upstreams = []string{"127.0.0.1:1053"}
			o.ResolvConf = filepath.Join(dir, "nope")
		}), upstreams: []string{"127.0.0.1:1053"}},
		{name: "no resolv.conf at all", opts: base(func(o *Options) { o.Upstreams = []string{"127.0.0.1:1053"}; o.ResolvConf = "" }),
			upstreams: []string{"127.0.0.1:1053"}},
		{name: "no upstream at all", opts: base(func(o *Options) {
			o.Upstreams = []string{"none"}
			o.ResolvConf = filepath.Join(dir, "nope")
		})},
		{name: "wildcard listen", opts: base(func(o *Options) { o.Listen = ":53" }), upstreams: []string{"192.0.2.53:53", "[2001:db8::53]:53"},
			hostSearch: []string{"corp.example", "lab.example"}},

		{name: "kubeconfig required", opts: base(func(o *Options) { o.Kubeconfig = "" }), wantErr: "--kubeconfig is required"},
		{name: "listen without port", opts: base(func(o *Options) { o.Listen = "127.0.0.1" }), wantErr: `--listen "127.0.0.1": want ADDRESS:PORT`},
		{name: "listen on a name", opts: base(func(o *Options) { o.Listen = "localhost:53" }), wantErr: "not an IP address"},
		{name: "listen bad port", opts: base(func(o *Options) { o.Listen = "127.0.0.1:70000" }), wantErr: "not a number from 0 to 65535"},
		{name: "zone", opts: base(func(o *Options) { o.Zone = "bad zone" }), wantErr: "--zone"},
		{name: "zone root", opts: base(func(o *Options) { o.Zone = "." }), wantErr: "--zone"},
		{name: "pods", opts: base(func(o *Options) { o.Pods = "yes" }), wantErr: "want disabled, insecure or verified"},
		{name: "ttl zero", opts: base(func(o *Options) { o.TTL = 0 }), wantErr: "--ttl 0: want 1 to 3600"},
		{name: "ttl large", opts: base(func(o *Options) { o.TTL = 86400 }), wantErr: "--ttl 86400"},
		{name: "upstream name", opts: base(func(o *Options) { o.Upstreams = []string{"dns.google:53"} }), wantErr: `--upstream "dns.google:53"`},
		{name: "upstream port 0", opts: base(func(o *Options) { o.Upstreams = []string{"127.0.0.1:0"} }), wantErr: "port 0"},
		{name: "upstream is ourselves", opts: base(func(o *Options) { o.Upstreams = []string{"127.0.0.1:5353"} }), wantErr: "own --listen address"},
		{name: "upstream is ourselves on wildcard", opts: base(func(o *Options) {
			o.Listen = "0.0.0.0:5353"
			o.Upstreams = []string{"127.0.0.1:5353"}
		}), wantErr: "own --listen address"},
		{name: "no upstream anywhere", opts: base(func(o *Options) { o.ResolvConf = empty }), wantErr: "has no nameserver line"},
		{name: "no upstream, no resolv.conf", opts: base(func(o *Options) { o.ResolvConf = "" }), wantErr: "give --upstream or --resolv-conf"},
		{name: "resolv.conf missing", opts: base(func(o *Options) { o.ResolvConf = filepath.Join(dir, "nope") }), wantErr: "--resolv-conf"},
		{name: "service cidr", opts: base(func(o *Options) { o.ServiceCIDRs = []string{"10.96.0.0/12", "10.96.0.0"} }), wantErr: `--service-cidr "10.96.0.0"`},
		{name: "pod cidr", opts: base(func(o *Options) { o.PodCIDRs = []string{"fd00::/300"} }), wantErr: `--pod-cidr "fd00::/300"`},
		{name: "metrics address", opts: base(func(o *Options) { o.MetricsBindAddress = "9153" }), wantErr: "--metrics-bind-address"},
		{name: "health address", opts: base(func(o *Options) { o.HealthBindAddress = "localhost:8080" }), wantErr: "--health-bind-address"},
		{name: "forward without servers", opts: base(func(o *Options) { o.Forward = []string{"acme.local"} }), wantErr: `want ZONE=SERVER[,SERVER]`},
		{name: "forward bad server", opts: base(func(o *Options) { o.Forward = []string{"acme.local=ns.acme.local"} }), wantErr: `server "ns.acme.local"`},
		{name: "forward bad zone", opts: base(func(o *Options) { o.Forward = []string{"acme..local=10.0.0.1"} }), wantErr: "not a domain name"},
		{name: "forward in the cluster zone", opts: base(func(o *Options) { o.Forward = []string{"svc.Cluster.Local=10.0.0.1"} }), wantErr: "inside the cluster zone"},
		{name: "forward twice", opts: base(func(o *Options) { o.Forward = []string{"acme.local=10.0.0.1", "ACME.local.=10.0.0.2"} }), wantErr: "given twice"},
		{name: "forward to ourselves", opts: base(func(o *Options) { o.Forward = []string{"acme.local=127.0.0.1:5353"} }), wantErr: "own --listen address"},
		{name: "configmap without namespace", opts: base(func(o *Options) { o.ConfigMap = "kube-dns" }), wantErr: "--configmap"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tc.opts.parse()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parse() error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parse() = %v", err)
			}
			if !slices.Equal(c.upstreams, tc.upstreams) {
				t.Errorf("upstreams = %q, want %q", c.upstreams, tc.upstreams)
			}
			if !slices.Equal(c.hostSearch, tc.hostSearch) {
				t.Errorf("host search = %q, want %q", c.hostSearch, tc.hostSearch)
			}
		})
	}
}

// TestParseReportsEveryError: a person fixing a command line should see
// all of its mistakes at once, not one per attempt.
func TestParseReportsEveryError(t *testing.T) {
	o := Defaults()
	o.Listen, o.TTL, o.Pods = "x", -1, "all"
	_, err := o.parse()
	if err == nil {
		t.Fatal("parse() succeeded")
	}
	for _, want := range []string{"--kubeconfig", "--listen", "--ttl", "--pods"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

// TestStubs: --forward zones canonical, servers with port 53 added.
func TestStubs(t *testing.T) {
	o := Defaults()
	o.Kubeconfig, o.Upstreams = "kc", []string{"192.0.2.53"}
	o.Forward = []string{"Acme.Local=10.0.0.1,10.0.0.2:5353", "corp.example.=[2001:db8::1]:53"}
	c, err := o.parse()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"acme.local.": {"10.0.0.1:53", "10.0.0.2:5353"}, "corp.example.": {"[2001:db8::1]:53"}}
	if !maps.EqualFunc(c.stubs, want, slices.Equal) {
		t.Errorf("stubs %v, want %v", c.stubs, want)
	}
	if c.configMap != [2]string{"kube-system", "kube-dns"} {
		t.Errorf("configmap %v, want kube-system/kube-dns by default", c.configMap)
	}
}

// TestRoutesFromConfigMap reads kube-dns's keys as kube-dns does:
// upstreamNameservers replace the upstreams, stubDomains join the
// flags' zones, anything wrong is an error naming the key.
func TestRoutesFromConfigMap(t *testing.T) {
	o := Defaults()
	o.Kubeconfig, o.Upstreams, o.Forward = "kc", []string{"192.0.2.53"}, []string{"flag.example=10.0.0.9"}
	c, err := o.parse()
	if err != nil {
		t.Fatal(err)
	}
	cm := func(data map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-dns"}, Data: data}
	}
	cases := []struct {
		name    string
		cm      *corev1.ConfigMap
		def     []string
		zones   map[string][]string
		wantErr string
	}{
		{name: "no ConfigMap", def: []string{"192.0.2.53:53"}, zones: map[string][]string{"flag.example.": {"10.0.0.9:53"}}},
		{name: "empty ConfigMap", cm: cm(nil), def: []string{"192.0.2.53:53"}, zones: map[string][]string{"flag.example.": {"10.0.0.9:53"}}},
		{name: "both keys", cm: cm(map[string]string{
			"upstreamNameservers": `["8.8.8.8", "8.8.4.4:5353"]`,
			"stubDomains":         `{"acme.local": ["1.2.3.4"], "Lab.Example": ["1.2.3.5", "1.2.3.6:54"]}`,
		}), def: []string{"8.8.8.8:53", "8.8.4.4:5353"}, zones: map[string][]string{
			"flag.example.": {"10.0.0.9:53"}, "acme.local.": {"1.2.3.4:53"}, "lab.example.": {"1.2.3.5:53", "1.2.3.6:54"}}},
		{name: "empty upstream list keeps the flags'", cm: cm(map[string]string{"upstreamNameservers": `[]`}),
			def: []string{"192.0.2.53:53"}, zones: map[string][]string{"flag.example.": {"10.0.0.9:53"}}},
		{name: "upstreams not JSON", cm: cm(map[string]string{"upstreamNameservers": `8.8.8.8`}), wantErr: "upstreamNameservers: want a JSON list"},
		{name: "too many upstreams", cm: cm(map[string]string{"upstreamNameservers": `["1.1.1.1","1.1.1.2","1.1.1.3","1.1.1.4"]`}), wantErr: "at most 3"},
		{name: "upstream a name", cm: cm(map[string]string{"upstreamNameservers": `["dns.google"]`}), wantErr: `"dns.google"`},
		{name: "stubs not JSON", cm: cm(map[string]string{"stubDomains": `acme.local: 1.2.3.4`}), wantErr: "stubDomains: want a JSON object"},
		{name: "stub server a name", cm: cm(map[string]string{"stubDomains": `{"acme.local": ["ns1.acme.local"]}`}), wantErr: `acme.local: "ns1.acme.local"`},
		{name: "stub without servers", cm: cm(map[string]string{"stubDomains": `{"acme.local": []}`}), wantErr: "has no server"},
		{name: "stub in the cluster zone", cm: cm(map[string]string{"stubDomains": `{"svc.cluster.local": ["1.2.3.4"]}`}), wantErr: "inside the cluster zone"},
		{name: "stub also a flag", cm: cm(map[string]string{"stubDomains": `{"flag.example": ["1.2.3.4"]}`}), wantErr: "given twice"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := c.routes(tc.cm)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "kube-system/kube-dns") {
					t.Fatalf("routes() error = %v, want one naming the ConfigMap and containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(r.Default, tc.def) || !maps.EqualFunc(r.Zones, tc.zones, slices.Equal) {
				t.Errorf("routes = %v %v, want %v %v", r.Default, r.Zones, tc.def, tc.zones)
			}
		})
	}
	if !maps.EqualFunc(c.stubs, map[string][]string{"flag.example.": {"10.0.0.9:53"}}, slices.Equal) {
		t.Errorf("reading ConfigMaps changed the flags' stubs: %v", c.stubs)
	}
}

// TestKubeconfigInPod: in a pod (deploy/dns.yaml) no kubeconfig is
// needed, the ServiceAccount's credentials are used; outside one it is.
func TestKubeconfigInPod(t *testing.T) {
	o := Defaults()
	o.Listen, o.Upstreams = "127.0.0.1:5353", []string{"none"}
	if _, err := o.parse(); err == nil || !strings.Contains(err.Error(), "--kubeconfig is required outside a pod") {
		t.Errorf("outside a pod: err %v", err)
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
	if _, err := o.parse(); err != nil {
		t.Errorf("in a pod: %v", err)
	}
}
