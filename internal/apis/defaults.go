//lint:file-ignore SA1019 svcnet serves the v1 Endpoints API, deprecated in Kubernetes 1.33 but still served there too

package apis

import (
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// addDefaultingFuncs registers the defaults kube-apiserver applies when it
// decodes an object, so that what kubectl reads back looks the same.
func addDefaultingFuncs(s *runtime.Scheme) {
	s.AddTypeDefaultingFunc(&corev1.Pod{}, func(o any) { DefaultPod(o.(*corev1.Pod)) })
	s.AddTypeDefaultingFunc(&corev1.Service{}, func(o any) { DefaultService(o.(*corev1.Service)) })
	s.AddTypeDefaultingFunc(&corev1.Secret{}, func(o any) {
		if sec := o.(*corev1.Secret); sec.Type == "" {
			sec.Type = corev1.SecretTypeOpaque
		}
	})
	s.AddTypeDefaultingFunc(&corev1.Namespace{}, func(o any) {
		ns := o.(*corev1.Namespace)
		if ns.Status.Phase == "" {
			ns.Status.Phase = corev1.NamespaceActive
		}
	})
	s.AddTypeDefaultingFunc(&corev1.Endpoints{}, func(o any) {
		for i := range o.(*corev1.Endpoints).Subsets {
			for j := range o.(*corev1.Endpoints).Subsets[i].Ports {
				p := &o.(*corev1.Endpoints).Subsets[i].Ports[j]
				if p.Protocol == "" {
					p.Protocol = corev1.ProtocolTCP
				}
			}
		}
	})
	s.AddTypeDefaultingFunc(&discoveryv1.EndpointSlice{}, func(o any) {
		for i := range o.(*discoveryv1.EndpointSlice).Ports {
			p := &o.(*discoveryv1.EndpointSlice).Ports[i]
			if p.Name == nil {
				p.Name = ptr.To("")
			}
			if p.Protocol == nil {
				p.Protocol = ptr.To(corev1.ProtocolTCP)
			}
		}
	})
	s.AddTypeDefaultingFunc(&appsv1.Deployment{}, func(o any) { DefaultDeployment(o.(*appsv1.Deployment)) })
	s.AddTypeDefaultingFunc(&appsv1.StatefulSet{}, func(o any) { DefaultStatefulSet(o.(*appsv1.StatefulSet)) })
	s.AddTypeDefaultingFunc(&batchv1.Job{}, func(o any) { DefaultJob(o.(*batchv1.Job)) })
	s.AddTypeDefaultingFunc(&appsv1.DaemonSet{}, func(o any) { DefaultDaemonSet(o.(*appsv1.DaemonSet)) })
	s.AddTypeDefaultingFunc(&corev1.ReplicationController{}, func(o any) { DefaultReplicationController(o.(*corev1.ReplicationController)) })
	s.AddTypeDefaultingFunc(&appsv1.ReplicaSet{}, func(o any) {
		rs := o.(*appsv1.ReplicaSet)
		if rs.Spec.Replicas == nil {
			rs.Spec.Replicas = ptr.To[int32](1)
		}
		DefaultPodSpec(&rs.Spec.Template.Spec)
	})
}

// DefaultPod applies kube-apiserver's Pod defaults.
func DefaultPod(p *corev1.Pod) {
	DefaultPodSpec(&p.Spec)
	if p.Spec.EnableServiceLinks == nil {
		p.Spec.EnableServiceLinks = ptr.To(true)
	}
}

// DefaultPodSpec applies the defaults of a pod spec, in pods and templates.
func DefaultPodSpec(s *corev1.PodSpec) {
	if s.DNSPolicy == "" {
		s.DNSPolicy = corev1.DNSClusterFirst
	}
	if s.RestartPolicy == "" {
		s.RestartPolicy = corev1.RestartPolicyAlways
	}
	if s.TerminationGracePeriodSeconds == nil {
		s.TerminationGracePeriodSeconds = ptr.To[int64](corev1.DefaultTerminationGracePeriodSeconds)
	}
	if s.SecurityContext == nil {
		s.SecurityContext = &corev1.PodSecurityContext{}
	}
	if s.SchedulerName == "" {
		s.SchedulerName = corev1.DefaultSchedulerName
	}
	for i := range s.InitContainers {
		defaultContainer(&s.InitContainers[i])
	}
	for i := range s.Containers {
		defaultContainer(&s.Containers[i])
	}
}

func defaultContainer(c *corev1.Container) {
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = corev1.PullIfNotPresent
		if imageTag(c.Image) == "latest" || imageTag(c.Image) == "" {
			c.ImagePullPolicy = corev1.PullAlways
		}
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = corev1.ProtocolTCP
		}
	}
	for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe, c.StartupProbe} {
		defaultProbe(p)
	}
	for i := range c.Env {
		if vf := c.Env[i].ValueFrom; vf != nil && vf.FieldRef != nil && vf.FieldRef.APIVersion == "" {
			vf.FieldRef.APIVersion = "v1"
		}
	}
}

// imageTag returns the tag of an image reference ("" when it has none or
// is pinned by digest only).
func imageTag(image string) string {
	if strings.Contains(image, "@") {
		return "digest"
	}
	slash := strings.LastIndex(image, "/")
	if colon := strings.LastIndex(image, ":"); colon > slash {
		return image[colon+1:]
	}
	return ""
}

func defaultProbe(p *corev1.Probe) {
	if p == nil {
		return
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	if h := p.HTTPGet; h != nil {
		if h.Path == "" {
			h.Path = "/"
		}
		if h.Scheme == "" {
			h.Scheme = corev1.URISchemeHTTP
		}
	}
}

// DefaultService applies kube-apiserver's Service defaults. Addresses,
// IP families and node ports are not defaults: the registry allocates them.
func DefaultService(s *corev1.Service) {
	if s.Spec.Type == "" {
		s.Spec.Type = corev1.ServiceTypeClusterIP
	}
	if s.Spec.SessionAffinity == "" {
		s.Spec.SessionAffinity = corev1.ServiceAffinityNone
	}
	if s.Spec.SessionAffinity == corev1.ServiceAffinityNone {
		// As kube-apiserver's defaulting: switching affinity off drops
		// its configuration instead of refusing the update.
		s.Spec.SessionAffinityConfig = nil
	}
	if s.Spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		if s.Spec.SessionAffinityConfig == nil {
			s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{}
		}
		if s.Spec.SessionAffinityConfig.ClientIP == nil {
			s.Spec.SessionAffinityConfig.ClientIP = &corev1.ClientIPConfig{}
		}
		if s.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds == nil {
			s.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds = ptr.To(corev1.DefaultClientIPServiceAffinitySeconds)
		}
	}
	for i := range s.Spec.Ports {
		p := &s.Spec.Ports[i]
		if p.Protocol == "" {
			p.Protocol = corev1.ProtocolTCP
		}
		if p.TargetPort == (intstr.IntOrString{}) {
			p.TargetPort = intstr.FromInt32(p.Port)
		}
	}
	if s.Spec.Type != corev1.ServiceTypeExternalName && s.Spec.InternalTrafficPolicy == nil {
		s.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyCluster)
	}
	if (s.Spec.Type == corev1.ServiceTypeNodePort || s.Spec.Type == corev1.ServiceTypeLoadBalancer) &&
		s.Spec.ExternalTrafficPolicy == "" {
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	}
	if s.Spec.Type == corev1.ServiceTypeLoadBalancer && s.Spec.AllocateLoadBalancerNodePorts == nil {
		s.Spec.AllocateLoadBalancerNodePorts = ptr.To(true)
	}
}

// DefaultDaemonSet applies the apps/v1 DaemonSet defaults.
func DefaultDaemonSet(d *appsv1.DaemonSet) {
	if d.Spec.UpdateStrategy.Type == "" {
		d.Spec.UpdateStrategy.Type = appsv1.RollingUpdateDaemonSetStrategyType
	}
	if d.Spec.UpdateStrategy.Type == appsv1.RollingUpdateDaemonSetStrategyType {
		if d.Spec.UpdateStrategy.RollingUpdate == nil {
			d.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateDaemonSet{}
		}
		if d.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable == nil {
			one := intstr.FromInt32(1)
			d.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = &one
		}
		if d.Spec.UpdateStrategy.RollingUpdate.MaxSurge == nil {
			zero := intstr.FromInt32(0)
			d.Spec.UpdateStrategy.RollingUpdate.MaxSurge = &zero
		}
	}
	if d.Spec.RevisionHistoryLimit == nil {
		d.Spec.RevisionHistoryLimit = ptr.To[int32](10)
	}
	DefaultPodSpec(&d.Spec.Template.Spec)
}

// DefaultJob applies the batch/v1 Job defaults.
func DefaultJob(j *batchv1.Job) {
	if j.Spec.Completions == nil && j.Spec.Parallelism == nil {
		j.Spec.Completions = ptr.To[int32](1)
	}
	if j.Spec.Parallelism == nil {
		j.Spec.Parallelism = ptr.To[int32](1)
	}
	if j.Spec.BackoffLimit == nil {
		j.Spec.BackoffLimit = ptr.To[int32](6)
	}
	if j.Spec.CompletionMode == nil {
		j.Spec.CompletionMode = ptr.To(batchv1.NonIndexedCompletion)
	}
	if j.Spec.Suspend == nil {
		j.Spec.Suspend = ptr.To(false)
	}
	if j.Spec.ManualSelector == nil {
		j.Spec.ManualSelector = ptr.To(false)
	}
	if j.Spec.PodReplacementPolicy == nil {
		j.Spec.PodReplacementPolicy = ptr.To(batchv1.TerminatingOrFailed)
	}
	DefaultPodSpec(&j.Spec.Template.Spec)
}

// DefaultStatefulSet applies the apps/v1 StatefulSet defaults.
func DefaultStatefulSet(s *appsv1.StatefulSet) {
	if s.Spec.Replicas == nil {
		s.Spec.Replicas = ptr.To[int32](1)
	}
	if s.Spec.PodManagementPolicy == "" {
		s.Spec.PodManagementPolicy = appsv1.OrderedReadyPodManagement
	}
	if s.Spec.UpdateStrategy.Type == "" {
		s.Spec.UpdateStrategy.Type = appsv1.RollingUpdateStatefulSetStrategyType
	}
	if s.Spec.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType {
		if s.Spec.UpdateStrategy.RollingUpdate == nil {
			s.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{}
		}
		if s.Spec.UpdateStrategy.RollingUpdate.Partition == nil {
			s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To[int32](0)
		}
	}
	if s.Spec.RevisionHistoryLimit == nil {
		s.Spec.RevisionHistoryLimit = ptr.To[int32](10)
	}
	if s.Spec.PersistentVolumeClaimRetentionPolicy == nil {
		s.Spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
			WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType, WhenScaled: appsv1.RetainPersistentVolumeClaimRetentionPolicyType}
	}
	DefaultPodSpec(&s.Spec.Template.Spec)
}

// DefaultReplicationController applies the core/v1 defaults: one
// replica, and the selector and labels taken from the template when empty.
func DefaultReplicationController(rc *corev1.ReplicationController) {
	if rc.Spec.Replicas == nil {
		rc.Spec.Replicas = ptr.To[int32](1)
	}
	if t := rc.Spec.Template; t != nil {
		if len(rc.Spec.Selector) == 0 {
			rc.Spec.Selector = t.Labels
		}
		if len(rc.Labels) == 0 {
			rc.Labels = t.Labels
		}
		DefaultPodSpec(&t.Spec)
	}
}

// DefaultDeployment applies the apps/v1 Deployment defaults.
func DefaultDeployment(d *appsv1.Deployment) {
	if d.Spec.Replicas == nil {
		d.Spec.Replicas = ptr.To[int32](1)
	}
	if d.Spec.Strategy.Type == "" {
		d.Spec.Strategy.Type = appsv1.RollingUpdateDeploymentStrategyType
	}
	if d.Spec.Strategy.Type == appsv1.RollingUpdateDeploymentStrategyType {
		if d.Spec.Strategy.RollingUpdate == nil {
			d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{}
		}
		quarter := intstr.FromString("25%")
		if d.Spec.Strategy.RollingUpdate.MaxUnavailable == nil {
			d.Spec.Strategy.RollingUpdate.MaxUnavailable = &quarter
		}
		if d.Spec.Strategy.RollingUpdate.MaxSurge == nil {
			d.Spec.Strategy.RollingUpdate.MaxSurge = &quarter
		}
	}
	if d.Spec.RevisionHistoryLimit == nil {
		d.Spec.RevisionHistoryLimit = ptr.To[int32](10)
	}
	if d.Spec.ProgressDeadlineSeconds == nil {
		d.Spec.ProgressDeadlineSeconds = ptr.To[int32](600)
	}
	DefaultPodSpec(&d.Spec.Template.Spec)
}
