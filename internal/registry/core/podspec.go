// Package core is the registry of the core/v1 kinds other than Services:
// one file per kind, plus the pod spec rules that pods and the pod
// templates of workloads share.
package core

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
)

var (
	restartPolicies = sets.New(corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever)
	dnsPolicies     = sets.New(corev1.DNSClusterFirst, corev1.DNSClusterFirstWithHostNet, corev1.DNSDefault, corev1.DNSNone)
	protocols       = sets.New(corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP)
	pullPolicies    = sets.New(corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever)
)

// ValidatePodSpec checks the parts of a pod spec that svcnet relies on.
func ValidatePodSpec(spec *corev1.PodSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(spec.Containers) == 0 {
		errs = append(errs, field.Required(path.Child("containers"), ""))
	}
	names := sets.New[string]()
	errs = append(errs, validateContainers(spec.InitContainers, path.Child("initContainers"), names)...)
	errs = append(errs, validateContainers(spec.Containers, path.Child("containers"), names)...)
	// Sidecars (restartable init containers) are served; restart policies
	// and rules of other containers (ContainerRestartRules) are not, and
	// are refused rather than ignored.
	for i, c := range spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
			errs = append(errs, field.NotSupported(path.Child("initContainers").Index(i).Child("restartPolicy"), *c.RestartPolicy,
				[]string{string(corev1.ContainerRestartPolicyAlways)}))
		}
	}
	for i, c := range spec.Containers {
		if c.RestartPolicy != nil {
			errs = append(errs, field.Forbidden(path.Child("containers").Index(i).Child("restartPolicy"),
				"may not be set for non-init containers (svcnet serves restartPolicy only for sidecars)"))
		}
	}
	if spec.RestartPolicy != "" && !restartPolicies.Has(spec.RestartPolicy) {
		errs = append(errs, field.NotSupported(path.Child("restartPolicy"), spec.RestartPolicy, sets.List(restartPolicies)))
	}
	if spec.DNSPolicy != "" && !dnsPolicies.Has(spec.DNSPolicy) {
		errs = append(errs, field.NotSupported(path.Child("dnsPolicy"), spec.DNSPolicy, sets.List(dnsPolicies)))
	}
	if spec.DNSPolicy == corev1.DNSNone && (spec.DNSConfig == nil || len(spec.DNSConfig.Nameservers) == 0) {
		errs = append(errs, field.Required(path.Child("dnsConfig", "nameservers"), "must provide at least one DNS nameserver when `dnsPolicy` is None"))
	}
	if spec.Hostname != "" {
		errs = append(errs, registry.InvalidEach(path.Child("hostname"), spec.Hostname, validation.IsDNS1123Label(spec.Hostname))...)
	}
	if spec.Subdomain != "" {
		errs = append(errs, registry.InvalidEach(path.Child("subdomain"), spec.Subdomain, validation.IsDNS1123Label(spec.Subdomain))...)
	}
	if spec.NodeName != "" {
		errs = append(errs, registry.InvalidEach(path.Child("nodeName"), spec.NodeName, validation.IsDNS1123Subdomain(spec.NodeName))...)
	}
	errs = append(errs, metav1validation.ValidateLabels(spec.NodeSelector, path.Child("nodeSelector"))...)
	if g := spec.TerminationGracePeriodSeconds; g != nil && *g < 0 {
		errs = append(errs, field.Invalid(path.Child("terminationGracePeriodSeconds"), *g, "must be greater than or equal to 0"))
	}
	if d := spec.ActiveDeadlineSeconds; d != nil && *d <= 0 {
		errs = append(errs, field.Invalid(path.Child("activeDeadlineSeconds"), *d, "must be greater than 0"))
	}
	return errs
}

func validateContainers(cs []corev1.Container, path *field.Path, names sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	for i := range cs {
		c := &cs[i]
		cp := path.Index(i)
		if c.Name == "" {
			errs = append(errs, field.Required(cp.Child("name"), ""))
		} else {
			errs = append(errs, registry.UniqueName(cp.Child("name"), c.Name, validation.IsDNS1123Label, names)...)
		}
		if c.Image == "" {
			errs = append(errs, field.Required(cp.Child("image"), ""))
		}
		if c.ImagePullPolicy != "" && !pullPolicies.Has(c.ImagePullPolicy) {
			errs = append(errs, field.NotSupported(cp.Child("imagePullPolicy"), c.ImagePullPolicy, sets.List(pullPolicies)))
		}
		portNames := sets.New[string]()
		for j, p := range c.Ports {
			pp := cp.Child("ports").Index(j)
			if p.Name != "" {
				errs = append(errs, registry.UniqueName(pp.Child("name"), p.Name, validation.IsValidPortName, portNames)...)
			}
			errs = append(errs, registry.InvalidEach(pp.Child("containerPort"), p.ContainerPort, validation.IsValidPortNum(int(p.ContainerPort)))...)
			if p.HostPort != 0 {
				errs = append(errs, registry.InvalidEach(pp.Child("hostPort"), p.HostPort, validation.IsValidPortNum(int(p.HostPort)))...)
			}
			if p.Protocol != "" && !protocols.Has(p.Protocol) {
				errs = append(errs, field.NotSupported(pp.Child("protocol"), p.Protocol, sets.List(protocols)))
			}
		}
		// Names are any printable ASCII but '=' since Kubernetes 1.34
		// (RelaxedEnvironmentVariableValidation, GA).
		for j, e := range c.Env {
			np := cp.Child("env").Index(j).Child("name")
			if e.Name == "" {
				errs = append(errs, field.Required(np, ""))
				continue
			}
			errs = append(errs, registry.InvalidEach(np, e.Name, validation.IsRelaxedEnvVarName(e.Name))...)
		}
		errs = append(errs, validateProbe(c.ReadinessProbe, cp.Child("readinessProbe"), c)...)
		errs = append(errs, validateProbe(c.LivenessProbe, cp.Child("livenessProbe"), c)...)
		errs = append(errs, validateProbe(c.StartupProbe, cp.Child("startupProbe"), c)...)
		if c.StartupProbe != nil && c.StartupProbe.SuccessThreshold > 1 {
			errs = append(errs, field.Invalid(cp.Child("startupProbe", "successThreshold"), c.StartupProbe.SuccessThreshold, "must be 1"))
		}
		if c.LivenessProbe != nil && c.LivenessProbe.SuccessThreshold > 1 {
			errs = append(errs, field.Invalid(cp.Child("livenessProbe", "successThreshold"), c.LivenessProbe.SuccessThreshold, "must be 1"))
		}
	}
	return errs
}

func validateProbe(p *corev1.Probe, path *field.Path, c *corev1.Container) field.ErrorList {
	if p == nil {
		return nil
	}
	var errs field.ErrorList
	handlers := 0
	if p.Exec != nil {
		handlers++
		if len(p.Exec.Command) == 0 {
			errs = append(errs, field.Required(path.Child("exec", "command"), ""))
		}
	}
	if p.HTTPGet != nil {
		handlers++
		errs = append(errs, validateProbePort(p.HTTPGet.Port, path.Child("httpGet", "port"), c)...)
	}
	if p.TCPSocket != nil {
		handlers++
		errs = append(errs, validateProbePort(p.TCPSocket.Port, path.Child("tcpSocket", "port"), c)...)
	}
	if p.GRPC != nil {
		handlers++
	}
	switch {
	case handlers == 0:
		errs = append(errs, field.Required(path, "must specify a handler type"))
	case handlers > 1:
		errs = append(errs, field.Forbidden(path, "may not specify more than 1 handler type"))
	}
	for name, v := range map[string]int32{"initialDelaySeconds": p.InitialDelaySeconds, "timeoutSeconds": p.TimeoutSeconds,
		"periodSeconds": p.PeriodSeconds, "successThreshold": p.SuccessThreshold, "failureThreshold": p.FailureThreshold} {
		if v < 0 {
			errs = append(errs, field.Invalid(path.Child(name), v, "must be greater than or equal to 0"))
		}
	}
	return errs
}

func validateProbePort(port intstr.IntOrString, path *field.Path, c *corev1.Container) field.ErrorList {
	if port.Type == intstr.Int {
		if msgs := validation.IsValidPortNum(port.IntValue()); len(msgs) > 0 {
			return field.ErrorList{field.Invalid(path, port.IntValue(), msgs[0])}
		}
		return nil
	}
	for _, p := range c.Ports {
		if p.Name == port.StrVal {
			return nil
		}
	}
	if msgs := validation.IsValidPortName(port.StrVal); len(msgs) > 0 {
		return field.ErrorList{field.Invalid(path, port.StrVal, msgs[0])}
	}
	return field.ErrorList{field.Invalid(path, port.StrVal, fmt.Sprintf("must be a container port name of %q", c.Name))}
}
