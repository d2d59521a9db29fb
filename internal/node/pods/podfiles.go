package pods

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Hostname is the pod's hostname: its node's for a hostNetwork pod, else
// spec.hostname, else its name.
func Hostname(pod *corev1.Pod) string {
	if pod.Spec.HostNetwork && pod.Spec.NodeName != "" {
		return pod.Spec.NodeName
	}
	if pod.Spec.Hostname != "" {
		return pod.Spec.Hostname
	}
	if len(pod.Name) > 63 {
		return strings.TrimRight(pod.Name[:63], "-.")
	}
	return pod.Name
}

// HostsFile is the pod's /etc/hosts, as kubelet writes it.
func HostsFile(pod *corev1.Pod, ip, domain string) string {
	var b strings.Builder
	b.WriteString("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n" +
		"fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n")
	host := Hostname(pod)
	if pod.Spec.Subdomain != "" {
		fmt.Fprintf(&b, "%s\t%s.%s.%s.svc.%s\t%s\n", ip, host, pod.Spec.Subdomain, pod.Namespace, domain, host)
	} else {
		fmt.Fprintf(&b, "%s\t%s\n", ip, host)
	}
	for _, a := range pod.Spec.HostAliases {
		fmt.Fprintf(&b, "\n# Entries added by HostAliases.\n%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
	}
	return b.String()
}

// ResolvConf is the pod's /etc/resolv.conf for its dnsPolicy: the cluster
// DNS with the search path of its namespace for ClusterFirst, the node's
// for Default, and dnsConfig merged in.
func ResolvConf(pod *corev1.Pod, clusterDNS, domain, nodeResolv string) string {
	var servers, search, options []string
	switch pod.Spec.DNSPolicy {
	case corev1.DNSNone:
	case corev1.DNSDefault:
		servers, search, options = parseResolv(nodeResolv)
	case corev1.DNSClusterFirstWithHostNet, corev1.DNSClusterFirst, "":
		if pod.Spec.HostNetwork && pod.Spec.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
			servers, search, options = parseResolv(nodeResolv)
			break
		}
		servers = []string{clusterDNS}
		search = []string{pod.Namespace + ".svc." + domain, "svc." + domain, domain}
		options = []string{"ndots:5"}
	}
	if c := pod.Spec.DNSConfig; c != nil {
		servers = append(servers, c.Nameservers...)
		search = append(search, c.Searches...)
		for _, o := range c.Options {
			opt := o.Name
			if o.Value != nil {
				opt += ":" + *o.Value
			}
			options = mergeOption(options, opt)
		}
	}
	var b strings.Builder
	if len(search) > 0 {
		fmt.Fprintf(&b, "search %s\n", strings.Join(search, " "))
	}
	for _, s := range servers {
		fmt.Fprintf(&b, "nameserver %s\n", s)
	}
	if len(options) > 0 {
		fmt.Fprintf(&b, "options %s\n", strings.Join(options, " "))
	}
	return b.String()
}

// mergeOption replaces an option of the same name ("ndots") or adds it.
func mergeOption(opts []string, opt string) []string {
	name, _, _ := strings.Cut(opt, ":")
	for i, o := range opts {
		if n, _, _ := strings.Cut(o, ":"); n == name {
			opts[i] = opt
			return opts
		}
	}
	return append(opts, opt)
}

func parseResolv(s string) (servers, search, options []string) {
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "nameserver":
			servers = append(servers, f[1])
		case "search", "domain":
			search = append(search, f[1:]...)
		case "options":
			options = append(options, f[1:]...)
		}
	}
	return
}
