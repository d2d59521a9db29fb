package cluster

import (
	"strings"
	"testing"

	kipvs "github.com/svcnet/svcnet/internal/ipvs"
)

// ipvsRefusal is what up says of the ipvs mode on this kernel (no IPVS
// here; nothing where the kernel has it, as in the test VM).
func ipvsRefusal() string {
	if kipvs.Supported() == nil {
		return ""
	}
	return "modes that work on this kernel: iptables, userspace, nftables, ebpf"
}

func TestValidate(t *testing.T) {
	good := Options{Name: "svcnet", Nodes: 3, ProxyMode: "iptables", NodePortRange: "30000-32767",
		ServiceCIDR: "10.96.0.0/12", ClusterCIDR: "10.244.0.0/16"}
	cases := []struct {
		name    string
		change  func(*Options)
		wantErr string // "" for valid
	}{
		{"defaults", func(*Options) {}, ""},
		{"userspace", func(o *Options) { o.ProxyMode = "userspace" }, ""},
		{"upstreams", func(o *Options) { o.DNSUpstream = "10.0.0.53,10.0.0.54:5353" }, ""},
		{"one port", func(o *Options) { o.NodePortRange = "8477" }, ""},
		{"a mode this kernel cannot run", func(o *Options) { o.ProxyMode = "ipvs" }, ipvsRefusal()},
		{"an unknown mode", func(o *Options) { o.ProxyMode = "kernelspace" }, "unknown proxy mode"},
		{"reversed range", func(o *Options) { o.NodePortRange = "32767-30000" }, "--service-node-port-range"},
		{"range beyond ports", func(o *Options) { o.NodePortRange = "30000-70000" }, "--service-node-port-range"},
		{"not a range", func(o *Options) { o.NodePortRange = "high" }, "--service-node-port-range"},
		{"bad upstream", func(o *Options) { o.DNSUpstream = "dns.google" }, "--dns-upstream"},
		{"registry mirrors", func(o *Options) {
			o.RegistryMirrors = []string{"docker.io=http://10.0.0.5:5000", "docker.io=mirror.example"}
		}, ""},
		{"a mirror without its registry", func(o *Options) { o.RegistryMirrors = []string{"http://10.0.0.5:5000"} }, "--registry-mirror"},
		{"no nodes", func(o *Options) { o.Nodes = 0 }, "--nodes"},
		{"bad name", func(o *Options) { o.Name = "My_Cluster" }, "cluster name"},
		{"not an iptables", func(o *Options) { o.IPTablesBinary = "nft" }, "--iptables-binary"},
		{"an iptables not installed", func(o *Options) { o.IPTablesBinary = "iptables-svcnet-none" }, "is not installed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := good
			tc.change(&o)
			err := o.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one mentioning %q", err, tc.wantErr)
			}
		})
	}
}

// TestHints: the commands up prints work as printed: the example's
// nodePort only where the range has it, the binary as invoked.
func TestHints(t *testing.T) {
	o := Options{Name: "demo", NodePortRange: "8000-32767"}
	h := Hints(o, "/k", "./bin/svcnet")
	for _, want := range []string{"kubectl apply -f examples/hostnames.yaml", "./bin/svcnet exec --name demo client -- curl -s 172.18.0.11:8477", "./bin/svcnet down --name demo"} {
		if !strings.Contains(h, want) {
			t.Errorf("hints lack %q:\n%s", want, h)
		}
	}
	o.NodePortRange = "30000-32767"
	h = Hints(o, "/k", "svcnet")
	if strings.Contains(h, "kubectl apply -f examples/hostnames.yaml") || !strings.Contains(h, "--service-node-port-range 8000-32767") {
		t.Errorf("with the default range the example cannot be applied, hints:\n%s", h)
	}
}
