package pods

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// ServiceEnv returns the Docker-links style variables kubelet gives a pod
// for the Services of its namespace that exist when it starts (those with
// a cluster IP), plus the API server's in the default namespace, which
// every pod gets.
func ServiceEnv(ns string, services []*corev1.Service, enableServiceLinks bool) []corev1.EnvVar {
	var out []corev1.EnvVar
	sorted := append([]*corev1.Service(nil), services...)
	sort.Slice(sorted, func(i, j int) bool {
		if sorted[i].Namespace != sorted[j].Namespace {
			return sorted[i].Namespace < sorted[j].Namespace
		}
		return sorted[i].Name < sorted[j].Name
	})
	seen := map[string]bool{}
	for _, svc := range sorted {
		ip := svc.Spec.ClusterIP
		if ip == "" || ip == corev1.ClusterIPNone {
			continue
		}
		master := svc.Namespace == "default" && svc.Name == "kubernetes"
		switch {
		case master:
		case svc.Namespace == ns && enableServiceLinks:
		default:
			continue
		}
		if seen[svc.Name] {
			continue
		}
		seen[svc.Name] = true
		out = append(out, serviceVars(svc)...)
	}
	return out
}

func envName(name string) string {
	return strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// serviceVars follows kubelet's makeEnvironmentVariables: the first port
// gives {SVC}_SERVICE_PORT and {SVC}_PORT.
func serviceVars(svc *corev1.Service) []corev1.EnvVar {
	if len(svc.Spec.Ports) == 0 {
		return nil
	}
	name := envName(svc.Name)
	ip := svc.Spec.ClusterIP
	first := svc.Spec.Ports[0]
	vars := []corev1.EnvVar{
		{Name: name + "_SERVICE_HOST", Value: ip},
		{Name: name + "_SERVICE_PORT", Value: strconv.Itoa(int(first.Port))},
	}
	for _, p := range svc.Spec.Ports {
		if p.Name != "" {
			vars = append(vars, corev1.EnvVar{Name: name + "_SERVICE_PORT_" + envName(p.Name), Value: strconv.Itoa(int(p.Port))})
		}
	}
	proto := strings.ToLower(string(first.Protocol))
	vars = append(vars, corev1.EnvVar{Name: name + "_PORT", Value: fmt.Sprintf("%s://%s", proto, hostPort(ip, first.Port))})
	for _, p := range svc.Spec.Ports {
		proto := strings.ToLower(string(p.Protocol))
		prefix := fmt.Sprintf("%s_PORT_%d_%s", name, p.Port, strings.ToUpper(proto))
		vars = append(vars,
			corev1.EnvVar{Name: prefix, Value: fmt.Sprintf("%s://%s", proto, hostPort(ip, p.Port))},
			corev1.EnvVar{Name: prefix + "_PROTO", Value: proto},
			corev1.EnvVar{Name: prefix + "_PORT", Value: strconv.Itoa(int(p.Port))},
			corev1.EnvVar{Name: prefix + "_ADDR", Value: ip},
		)
	}
	return vars
}

func hostPort(ip string, port int32) string {
	if strings.Contains(ip, ":") {
		return fmt.Sprintf("[%s]:%d", ip, port)
	}
	return fmt.Sprintf("%s:%d", ip, port)
}

// Expand replaces $(VAR) references with the values of vars, as
// Kubernetes does in env values, commands and args: $$ escapes a $, and
// references to unknown variables stay as they are.
func Expand(s string, vars map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := vars[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}
