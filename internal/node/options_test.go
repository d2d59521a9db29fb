package node

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestOptionsConfig(t *testing.T) {
	valid := func() Options {
		o := Defaults()
		o.HostnameOverride, o.NodeIP, o.PodCIDR = "node-1", "172.18.0.11", "10.244.1.0/24"
		return o
	}
	o := valid()
	o.ClusterCIDR, o.NodeLabels = "10.244.0.0/16", []string{"zone=a", "empty="}
	o.ProxyCommand, o.NodeCacheCommand = "/bin/svcnet proxy --kubeconfig /k", ""
	o.ImageStoreDir, o.InsecureRegistries = "/var/lib/images", []string{"10.0.0.5:5000"}
	o.RegistryMirrors = []string{"docker.io=http://10.0.0.5:5000", "quay.io=q.example", "docker.io=m.example"}
	cfg, err := o.Config()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NodeName != "node-1" || cfg.NodeIP != netip.MustParseAddr("172.18.0.11") ||
		cfg.PodCIDR != netip.MustParsePrefix("10.244.1.0/24") || cfg.ClusterCIDR != netip.MustParsePrefix("10.244.0.0/16") {
		t.Errorf("config %+v", cfg)
	}
	if cfg.Labels["zone"] != "a" || len(cfg.Labels) != 2 {
		t.Errorf("labels %v", cfg.Labels)
	}
	if !slices.Equal(cfg.Proxy, []string{"/bin/svcnet", "proxy", "--kubeconfig", "/k"}) || cfg.NodeCache != nil {
		t.Errorf("proxy %q, node cache %q", cfg.Proxy, cfg.NodeCache)
	}
	if cfg.ImageStoreDir != "/var/lib/images" || !slices.Equal(cfg.InsecureRegistries, []string{"10.0.0.5:5000"}) ||
		!slices.Equal(cfg.RegistryMirrors["docker.io"], []string{"http://10.0.0.5:5000", "m.example"}) ||
		!slices.Equal(cfg.RegistryMirrors["quay.io"], []string{"q.example"}) || len(cfg.RegistryMirrors) != 2 {
		t.Errorf("image settings: store %q, mirrors %v, insecure %v", cfg.ImageStoreDir, cfg.RegistryMirrors, cfg.InsecureRegistries)
	}
	args := strings.Join(o.Args(), " ")
	for _, want := range []string{"--registry-mirror=docker.io=http://10.0.0.5:5000 --registry-mirror=quay.io=q.example",
		"--insecure-registry=10.0.0.5:5000", "--image-store-dir=/var/lib/images"} {
		if !strings.Contains(args, want) {
			t.Errorf("args %q lack %q", args, want)
		}
	}
	if cfg.EndpointDrainDelay != 0 || cfg.Bridge != "cbr0" {
		t.Errorf("defaults not carried: %+v", cfg)
	}

	bad := []struct {
		name string
		edit func(*Options)
		want string
	}{
		{"node IP", func(o *Options) { o.NodeIP = "node-1" }, "--node-ip"},
		{"no node IP", func(o *Options) { o.NodeIP = "" }, "--node-ip"},
		{"pod CIDR", func(o *Options) { o.PodCIDR = "10.244.1.0" }, "--pod-cidr"},
		{"cluster CIDR", func(o *Options) { o.ClusterCIDR = "10.244.0.0/33" }, "--cluster-cidr"},
		{"a mirror without its registry", func(o *Options) { o.RegistryMirrors = []string{"http://10.0.0.5:5000"} }, "--registry-mirror"},
		{"a mirror of nothing", func(o *Options) { o.RegistryMirrors = []string{"docker.io="} }, "--registry-mirror"},
	}
	for _, tc := range bad {
		o := valid()
		tc.edit(&o)
		if _, err := o.Config(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %s", tc.name, err, tc.want)
		}
	}
}
