package hostports

import (
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestFromPodAndRules(t *testing.T) {
	pod := func(hostNetwork bool, ports ...corev1.ContainerPort) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"},
			Spec: corev1.PodSpec{HostNetwork: hostNetwork, Containers: []corev1.Container{{Name: "c", Ports: ports}}}}
	}
	ip := netip.MustParseAddr("10.244.1.5")
	for _, tc := range []struct {
		name  string
		pod   *corev1.Pod
		podIP netip.Addr
		want  []string // rules, in order
	}{
		{"no hostPort", pod(false, corev1.ContainerPort{ContainerPort: 80}), ip, nil},
		{"hostNetwork needs none", pod(true, corev1.ContainerPort{ContainerPort: 80, HostPort: 80}), ip, nil},
		{"no address yet", pod(false, corev1.ContainerPort{ContainerPort: 80, HostPort: 80}), netip.Addr{}, nil},
		{"any address, TCP by default, and UDP on one hostIP",
			pod(false, corev1.ContainerPort{ContainerPort: 8080, HostPort: 54323},
				corev1.ContainerPort{ContainerPort: 8081, HostPort: 54323, HostIP: "127.0.0.1", Protocol: corev1.ProtocolUDP}), ip,
			[]string{
				`-A SVCNET-HOSTPORTS -p tcp --dport 54323 -m comment --comment "ns/p hostPort 54323" -j DNAT --to-destination 10.244.1.5:8080`,
				`-A SVCNET-HOSTPORTS-MASQ -p tcp -s 127.0.0.0/8 -d 10.244.1.5 --dport 8080 -m comment --comment "ns/p hostPort 54323" -j MASQUERADE`,
				`-A SVCNET-HOSTPORTS-MASQ -p tcp -s 10.244.1.5 -d 10.244.1.5 --dport 8080 -m comment --comment "ns/p hostPort 54323" -j MASQUERADE`,
				`-A SVCNET-HOSTPORTS -p udp -d 127.0.0.1 --dport 54323 -m comment --comment "ns/p hostPort 54323" -j DNAT --to-destination 10.244.1.5:8081`,
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := FromPod(tc.pod, tc.podIP)
			rules := Rules(ms)
			if !strings.HasPrefix(rules, "*nat\n:SVCNET-HOSTPORTS - [0:0]\n:SVCNET-HOSTPORTS-MASQ - [0:0]\n") || !strings.HasSuffix(rules, "COMMIT\n") {
				t.Fatalf("rules do not replace both chains:\n%s", rules)
			}
			var got []string
			for _, l := range strings.Split(rules, "\n") {
				if strings.HasPrefix(l, "-A ") {
					got = append(got, l)
				}
			}
			if len(got) != 3*len(ms) {
				t.Errorf("%d rules for %d mappings", len(got), len(ms))
			}
			last := -1
			for _, w := range tc.want {
				i := indexOf(got, w)
				if i < 0 {
					t.Errorf("missing %s\nin:\n%s", w, rules)
					continue
				}
				if strings.Contains(w, "DNAT") && i < last {
					t.Errorf("DNAT rules out of order (by port, protocol)")
				}
				last = i
			}
		})
	}
}

func indexOf(ss []string, s string) int {
	for i, x := range ss {
		if x == s {
			return i
		}
	}
	return -1
}
