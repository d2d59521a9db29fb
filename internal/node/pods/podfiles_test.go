package pods

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestResolvConf(t *testing.T) {
	pod := func(policy corev1.DNSPolicy, cfg *corev1.PodDNSConfig) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "web"}, Spec: corev1.PodSpec{DNSPolicy: policy, DNSConfig: cfg}}
	}
	node := "nameserver 192.0.2.53\nsearch example.com\n"
	cases := []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"cluster first", pod(corev1.DNSClusterFirst, nil),
			"search web.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n"},
		{"default", pod(corev1.DNSDefault, nil), "search example.com\nnameserver 192.0.2.53\n"},
		{"none with config", pod(corev1.DNSNone, &corev1.PodDNSConfig{Nameservers: []string{"1.2.3.4"}, Searches: []string{"a.b"}}),
			"search a.b\nnameserver 1.2.3.4\n"},
		{"ndots overridden", pod(corev1.DNSClusterFirst, &corev1.PodDNSConfig{Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("2")}, {Name: "edns0"}}}),
			"search web.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\noptions ndots:2 edns0\n"},
	}
	for _, c := range cases {
		if got := ResolvConf(c.pod, "10.96.0.10", "cluster.local", node); got != c.want {
			t.Errorf("%s:\n%s\nwant:\n%s", c.name, got, c.want)
		}
	}
}

func TestHostsFile(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "default"},
		Spec: corev1.PodSpec{Hostname: "web-0", Subdomain: "nginx", HostAliases: []corev1.HostAlias{{IP: "1.2.3.4", Hostnames: []string{"foo"}}}}}
	got := HostsFile(p, "10.244.1.5", "cluster.local")
	for _, want := range []string{"127.0.0.1\tlocalhost", "10.244.1.5\tweb-0.nginx.default.svc.cluster.local\tweb-0", "1.2.3.4\tfoo"} {
		if !strings.Contains(got, want) {
			t.Errorf("hosts lacks %q:\n%s", want, got)
		}
	}
	long := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: strings.Repeat("a", 70)}}
	if h := Hostname(long); len(h) != 63 {
		t.Errorf("hostname of %d chars", len(h))
	}
}

func TestHostname(t *testing.T) {
	for _, tc := range []struct {
		spec corev1.PodSpec
		want string
	}{
		{corev1.PodSpec{}, "p"},
		{corev1.PodSpec{Hostname: "web-0"}, "web-0"},
		{corev1.PodSpec{HostNetwork: true, NodeName: "node-2", Hostname: "ignored"}, "node-2"},
	} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: tc.spec}
		if got := Hostname(pod); got != tc.want {
			t.Errorf("Hostname(%+v) = %q, want %q", tc.spec, got, tc.want)
		}
	}
}
