package core

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/apis"
	"github.com/svcnet/svcnet/internal/registry"

	. "github.com/svcnet/svcnet/internal/registry/registrytest"
)

func TestDefaultTolerations(t *testing.T) {
	unreachable60 := corev1.Toleration{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](60)}
	cases := []struct {
		name string
		in   []corev1.Toleration
		want map[string]int64 // key -> seconds of its NoExecute toleration
		n    int
	}{
		{"none: both defaults", nil, map[string]int64{corev1.TaintNodeNotReady: 300, corev1.TaintNodeUnreachable: 300}, 2},
		{"own unreachable kept", []corev1.Toleration{unreachable60}, map[string]int64{corev1.TaintNodeNotReady: 300, corev1.TaintNodeUnreachable: 60}, 2},
		{"everything tolerated: nothing added", []corev1.Toleration{{Operator: corev1.TolerationOpExists}}, map[string]int64{}, 1},
		{"an Equal toleration counts by key and effect", []corev1.Toleration{{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpEqual, Value: "x", Effect: corev1.TaintEffectNoExecute}},
			map[string]int64{corev1.TaintNodeNotReady: -1, corev1.TaintNodeUnreachable: 300}, 2},
		{"a NoSchedule toleration does not count", []corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			map[string]int64{corev1.TaintNodeNotReady: 300, corev1.TaintNodeUnreachable: 300}, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := DefaultTolerations(append([]corev1.Toleration(nil), tc.in...))
			if len(out) != tc.n {
				t.Fatalf("tolerations %+v", out)
			}
			got := map[string]int64{}
			for _, tol := range out {
				if tol.Effect == corev1.TaintEffectNoExecute && tol.Key != "" {
					got[tol.Key] = ptr.Deref(tol.TolerationSeconds, -1)
				}
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s: %d s, want %d", k, got[k], v)
				}
			}
		})
	}
}

func pod(mutate func(*corev1.Pod)) *corev1.Pod {
	return Mutated(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx:1.27"}}},
	}, mutate)
}

func resources(requests, limits string) corev1.ResourceRequirements {
	list := func(s string) corev1.ResourceList {
		if s == "" {
			return nil
		}
		l := corev1.ResourceList{}
		for _, kv := range strings.Split(s, ",") {
			k, v, _ := strings.Cut(kv, "=")
			l[corev1.ResourceName(k)] = resource.MustParse(v)
		}
		return l
	}
	return corev1.ResourceRequirements{Requests: list(requests), Limits: list(limits)}
}

func TestPodPrepareForCreate(t *testing.T) {
	cases := []struct {
		name    string
		mutate  func(*corev1.Pod)
		qos     corev1.PodQOSClass
		account string
	}{
		{"no resources", nil, corev1.PodQOSBestEffort, "default"},
		{"limits only", func(p *corev1.Pod) { p.Spec.Containers[0].Resources = resources("", "cpu=1,memory=1Gi") },
			corev1.PodQOSGuaranteed, "default"},
		{"requests equal to limits", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = resources("cpu=500m,memory=1Gi", "cpu=0.5,memory=1024Mi")
		}, corev1.PodQOSGuaranteed, "default"},
		{"requests below limits", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = resources("cpu=250m,memory=1Gi", "cpu=500m,memory=1Gi")
		}, corev1.PodQOSBurstable, "default"},
		{"requests only", func(p *corev1.Pod) { p.Spec.Containers[0].Resources = resources("cpu=100m", "") },
			corev1.PodQOSBurstable, "default"},
		{"a cpu limit without a memory limit", func(p *corev1.Pod) { p.Spec.Containers[0].Resources = resources("", "cpu=1") },
			corev1.PodQOSBurstable, "default"},
		{"one container guaranteed, one without resources", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = resources("", "cpu=1,memory=1Gi")
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "log", Image: "busybox"})
		}, corev1.PodQOSBurstable, "default"},
		{"own service account", func(p *corev1.Pod) { p.Spec.ServiceAccountName = "builder" }, corev1.PodQOSBestEffort, "builder"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := pod(tc.mutate)
			apis.Scheme.Default(p)
			// A client cannot choose the status of a new pod.
			p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.9", QOSClass: corev1.PodQOSGuaranteed,
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
			Create(t, InNamespace("default"), Pod, p)
			want := corev1.PodStatus{Phase: corev1.PodPending, QOSClass: tc.qos}
			if !reflect.DeepEqual(p.Status, want) {
				t.Errorf("status %+v, want %+v", p.Status, want)
			}
			if p.Spec.ServiceAccountName != tc.account || p.Spec.DeprecatedServiceAccount != tc.account {
				t.Errorf("service account %q (deprecated %q), want %q", p.Spec.ServiceAccountName, p.Spec.DeprecatedServiceAccount, tc.account)
			}
			if n := len(p.Spec.Tolerations); n != 2 {
				t.Errorf("%d tolerations, want the two defaults: %+v", n, p.Spec.Tolerations)
			}
			if p.Generation != 0 {
				t.Errorf("generation %d: pods count none", p.Generation)
			}
		})
	}
}

func TestPodValidate(t *testing.T) {
	const c0 = "spec.containers[0]."
	port := func(ports ...corev1.ContainerPort) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.Spec.Containers[0].Ports = ports }
	}
	RunCreate(t, Pod, pod, []Case[*corev1.Pod]{
		{"defaulted pod", nil, nil},
		{"upper-case name", func(p *corev1.Pod) { p.Name = "Web" }, []string{Inv("metadata.name")}},
		{"no containers", func(p *corev1.Pod) { p.Spec.Containers = nil }, []string{Req("spec.containers")}},
		{"unnamed container", func(p *corev1.Pod) { p.Spec.Containers[0].Name = "" }, []string{Req(c0 + "name")}},
		{"container name not a DNS label", func(p *corev1.Pod) { p.Spec.Containers[0].Name = "web_1" }, []string{Inv(c0 + "name")}},
		{"an init container named as a container", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "nginx", Image: "busybox"}}
		}, []string{"spec.containers[0].name: Duplicate value"}},
		{"no image", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "" }, []string{Req(c0 + "image")}},
		{"init container without an image", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "setup"}}
		}, []string{Req("spec.initContainers[0].image")}},
		{"unknown pull policy", func(p *corev1.Pod) { p.Spec.Containers[0].ImagePullPolicy = "Sometimes" },
			[]string{Unsup(c0 + "imagePullPolicy")}},
		{"ports", port(corev1.ContainerPort{Name: "http", ContainerPort: 80}, corev1.ContainerPort{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP, HostPort: 53}), nil},
		{"port 0", port(corev1.ContainerPort{ContainerPort: 0}), []string{Inv(c0 + "ports[0].containerPort")}},
		{"port above 65535", port(corev1.ContainerPort{ContainerPort: 65536}), []string{Inv(c0 + "ports[0].containerPort")}},
		{"host port above 65535", port(corev1.ContainerPort{ContainerPort: 80, HostPort: 70000}), []string{Inv(c0 + "ports[0].hostPort")}},
		{"unknown protocol", port(corev1.ContainerPort{ContainerPort: 80, Protocol: "HTTP"}), []string{Unsup(c0 + "ports[0].protocol")}},
		{"port name too long", port(corev1.ContainerPort{Name: "a-very-long-name", ContainerPort: 80}), []string{Inv(c0 + "ports[0].name")}},
		{"duplicate port names", port(corev1.ContainerPort{Name: "http", ContainerPort: 80}, corev1.ContainerPort{Name: "http", ContainerPort: 8080}),
			[]string{"spec.containers[0].ports[1].name: Duplicate value"}},
		{"env var names", func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "HOME"}, {Name: "my.setting"}, {Name: "_x-1"}}
		}, nil},
		{"env var name with an equals sign", func(p *corev1.Pod) { p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A=B"}} },
			[]string{Inv(c0 + "env[0].name")}},
		{"relaxed env var names", func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "1ST"}, {Name: "my var"}, {Name: "a:b/c$"}}
		}, nil},
		{"empty env var name", func(p *corev1.Pod) { p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A"}, {Name: ""}} },
			[]string{Req(c0 + "env[1].name")}},
		{"env var name with a tab", func(p *corev1.Pod) { p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A\tB"}} },
			[]string{Inv(c0 + "env[0].name")}},
		{"env var name beyond ASCII", func(p *corev1.Pod) { p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "größe"}} },
			[]string{Inv(c0 + "env[0].name")}},
		{"never restarted", func(p *corev1.Pod) { p.Spec.RestartPolicy = corev1.RestartPolicyNever }, nil},
		{"unknown restart policy", func(p *corev1.Pod) { p.Spec.RestartPolicy = "Sometimes" }, []string{Unsup("spec.restartPolicy")}},
		{"unknown DNS policy", func(p *corev1.Pod) { p.Spec.DNSPolicy = "Google" }, []string{Unsup("spec.dnsPolicy")}},
		{"no DNS policy without nameservers", func(p *corev1.Pod) { p.Spec.DNSPolicy = corev1.DNSNone },
			[]string{Req("spec.dnsConfig.nameservers")}},
		{"no DNS policy with a nameserver", func(p *corev1.Pod) {
			p.Spec.DNSPolicy = corev1.DNSNone
			p.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"1.1.1.1"}}
		}, nil},
		{"hostname and subdomain", func(p *corev1.Pod) { p.Spec.Hostname, p.Spec.Subdomain = "web-0", "web" }, nil},
		{"hostname with a dot", func(p *corev1.Pod) { p.Spec.Hostname = "web.0" }, []string{Inv("spec.hostname")}},
		{"subdomain with a dot", func(p *corev1.Pod) { p.Spec.Subdomain = "a.b" }, []string{Inv("spec.subdomain")}},
		{"node name", func(p *corev1.Pod) { p.Spec.NodeName = "node-1.example.com" }, nil},
		{"invalid node name", func(p *corev1.Pod) { p.Spec.NodeName = "Node_1" }, []string{Inv("spec.nodeName")}},
		{"invalid node selector", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"zone": "a b"} },
			[]string{Inv("spec.nodeSelector")}},
		{"no grace period", func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](0) }, nil},
		{"negative grace period", func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](-1) },
			[]string{Inv("spec.terminationGracePeriodSeconds")}},
		{"zero active deadline", func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr.To[int64](0) },
			[]string{Inv("spec.activeDeadlineSeconds")}},
		{"active deadline", func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr.To[int64](1) }, nil},
	})
}

func TestPodValidateProbes(t *testing.T) {
	const c0 = "spec.containers[0]."
	probe := func(kind string, p corev1.Probe) func(*corev1.Pod) {
		return func(pod *corev1.Pod) {
			c := &pod.Spec.Containers[0]
			c.Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
			switch kind {
			case "liveness":
				c.LivenessProbe = &p
			case "readiness":
				c.ReadinessProbe = &p
			case "startup":
				c.StartupProbe = &p
			}
		}
	}
	httpGet := func(port intstr.IntOrString) corev1.ProbeHandler {
		return corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: port}}
	}
	exec := corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}
	RunCreate(t, Pod, pod, []Case[*corev1.Pod]{
		{"http by port number", probe("liveness", corev1.Probe{ProbeHandler: httpGet(intstr.FromInt32(8080))}), nil},
		{"http by port name", probe("readiness", corev1.Probe{ProbeHandler: httpGet(intstr.FromString("http"))}), nil},
		{"tcp", probe("startup", corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}}}), nil},
		{"grpc", probe("liveness", corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9000}}}), nil},
		{"exec", probe("readiness", corev1.Probe{ProbeHandler: exec}), nil},
		{"no handler", probe("liveness", corev1.Probe{}), []string{Req(c0 + "livenessProbe")}},
		{"two handlers", probe("readiness", corev1.Probe{ProbeHandler: corev1.ProbeHandler{
			Exec: exec.Exec, TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}}}), []string{Forbid(c0 + "readinessProbe")}},
		{"exec without a command", probe("startup", corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{}}}),
			[]string{Req(c0 + "startupProbe.exec.command")}},
		{"http port 0", probe("liveness", corev1.Probe{ProbeHandler: httpGet(intstr.FromInt32(0))}),
			[]string{Inv(c0 + "livenessProbe.httpGet.port")}},
		{"tcp port above 65535", probe("readiness", corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(65536)}}}),
			[]string{Inv(c0 + "readinessProbe.tcpSocket.port")}},
		{"http port name that is not a port name", probe("liveness", corev1.Probe{ProbeHandler: httpGet(intstr.FromString("web_http"))}),
			[]string{Inv(c0 + "livenessProbe.httpGet.port")}},
		{"negative initial delay", probe("liveness", corev1.Probe{ProbeHandler: exec, InitialDelaySeconds: -1}),
			[]string{Inv(c0 + "livenessProbe.initialDelaySeconds")}},
		{"negative period and failure threshold", probe("readiness", corev1.Probe{ProbeHandler: exec, PeriodSeconds: -5, FailureThreshold: -1}),
			[]string{Inv(c0 + "readinessProbe.periodSeconds"), Inv(c0 + "readinessProbe.failureThreshold")}},
		{"negative timeout", probe("startup", corev1.Probe{ProbeHandler: exec, TimeoutSeconds: -1}),
			[]string{Inv(c0 + "startupProbe.timeoutSeconds")}},
		{"readiness after three successes", probe("readiness", corev1.Probe{ProbeHandler: exec, SuccessThreshold: 3}), nil},
		{"liveness after two successes", probe("liveness", corev1.Probe{ProbeHandler: exec, SuccessThreshold: 2}),
			[]string{Inv(c0 + "livenessProbe.successThreshold")}},
		{"startup after two successes", probe("startup", corev1.Probe{ProbeHandler: exec, SuccessThreshold: 2}),
			[]string{Inv(c0 + "startupProbe.successThreshold")}},
		{"probes of init containers are checked", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "sidecar", Image: "envoy", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
				ReadinessProbe: &corev1.Probe{}}}
		}, []string{Req("spec.initContainers[0].readinessProbe")}},
	})
}

func TestPodValidateUpdate(t *testing.T) {
	RunUpdate(t, Pod, pod, []Case[*corev1.Pod]{
		{"new image", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "nginx:1.28" }, nil},
		{"labels and annotations", func(p *corev1.Pod) {
			p.Labels = map[string]string{"app": "web"}
			p.Annotations = map[string]string{"note": "x"}
		}, nil},
		{"an added toleration", func(p *corev1.Pod) {
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "gpu", Operator: corev1.TolerationOpExists})
		}, nil},
		{"an emptied image", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "" }, []string{Req("spec.containers[0].image")}},
		{"an added container", func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "log", Image: "busybox"})
		}, []string{Forbid("spec")}},
		{"a removed container", func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "log", Image: "busybox"})[1:]
		}, []string{Forbid("spec")}},
		{"a renamed container", func(p *corev1.Pod) { p.Spec.Containers[0].Name = "web" }, []string{Forbid("spec")}},
		{"new environment", func(p *corev1.Pod) { p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "1"}} },
			[]string{Forbid("spec")}},
		{"moved to another node", func(p *corev1.Pod) { p.Spec.NodeName = "node-2" }, []string{Forbid("spec")}},
		{"new restart policy", func(p *corev1.Pod) { p.Spec.RestartPolicy = corev1.RestartPolicyNever }, []string{Forbid("spec")}},
		{"new node selector", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"zone": "a"} }, []string{Forbid("spec")}},
	})
}

func TestPodValidateUpdateInitImage(t *testing.T) {
	withInit := func(image string) *corev1.Pod {
		return pod(func(p *corev1.Pod) { p.Spec.InitContainers = []corev1.Container{{Name: "setup", Image: image}} })
	}
	old := withInit("busybox:1.36")
	apis.Scheme.Default(old)
	CheckErrors(t, ValidateUpdate(Pod, withInit("busybox:1.37"), old))
	CheckErrors(t, ValidateUpdate(Pod, pod(nil), old), Forbid("spec"))
}

func TestPodStatusUpdate(t *testing.T) {
	running := func(p *corev1.Pod) {
		p.Spec.NodeName = "node-1"
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.0.5"}
	}
	cases := []struct {
		name     string
		oldPhase corev1.PodPhase
		mutate   func(*corev1.Pod)
		want     []string
	}{
		{"pending to running", corev1.PodPending, running, nil},
		{"running to succeeded", corev1.PodRunning, func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }, nil},
		{"running to failed", corev1.PodRunning, func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }, nil},
		{"succeeded to running", corev1.PodSucceeded, func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning },
			[]string{Forbid("status.phase")}},
		{"failed to pending", corev1.PodFailed, func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending },
			[]string{Forbid("status.phase")}},
		{"failed pod gains a condition", corev1.PodFailed, func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
		}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old := pod(func(p *corev1.Pod) { p.Status.Phase = tc.oldPhase })
			apis.Scheme.Default(old)
			obj := Mutated(old.DeepCopy(), tc.mutate)
			s := &registry.StatusStrategy{Strategy: registry.NewStrategy(Pod)}
			s.PrepareForUpdate(InNamespace("default"), obj, old)
			CheckErrors(t, s.ValidateUpdate(InNamespace("default"), obj, old), tc.want...)
			if obj.Spec.NodeName != "" {
				t.Errorf("status update changed spec.nodeName to %q", obj.Spec.NodeName)
			}
		})
	}
}

func TestPodUpdateStatusAndSpec(t *testing.T) {
	old := pod(func(p *corev1.Pod) {
		p.Spec.NodeName = "node-1"
		p.Status.Phase = corev1.PodRunning
		p.Finalizers = []string{"example.com/keep"}
		p.ResourceVersion = "7"
	})
	apis.Scheme.Default(old)
	ctx := InNamespace("default")

	// The main resource keeps the status.
	obj := old.DeepCopy()
	obj.Spec.Containers[0].Image = "nginx:1.28"
	obj.Status.Phase = corev1.PodFailed
	Update(t, ctx, Pod, false, obj, old)
	if obj.Status.Phase != corev1.PodRunning || obj.Spec.Containers[0].Image != "nginx:1.28" {
		t.Errorf("update: phase %q, image %q", obj.Status.Phase, obj.Spec.Containers[0].Image)
	}

	// The status subresource keeps spec, finalizers and owners.
	obj = old.DeepCopy()
	obj.Spec.Containers[0].Image = "nginx:1.28"
	obj.Status.Phase = corev1.PodSucceeded
	obj.Finalizers = nil
	obj.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "node-1", UID: "u"}}
	Update(t, ctx, Pod, true, obj, old)
	if obj.Status.Phase != corev1.PodSucceeded || obj.Spec.Containers[0].Image != "nginx:1.27" ||
		!slices.Equal(obj.Finalizers, old.Finalizers) || len(obj.OwnerReferences) != 0 {
		t.Errorf("status update: phase %q, image %q, finalizers %v, owners %v",
			obj.Status.Phase, obj.Spec.Containers[0].Image, obj.Finalizers, obj.OwnerReferences)
	}
}

func TestPodGracefulDelete(t *testing.T) {
	cases := []struct {
		name    string
		node    string
		phase   corev1.PodPhase
		own     *int64 // the pod's terminationGracePeriodSeconds
		request *int64 // the delete's gracePeriodSeconds
		want    int64
	}{
		{"the pod's own period", "node-1", corev1.PodRunning, ptr.To[int64](45), nil, 45},
		{"the request's period first", "node-1", corev1.PodRunning, ptr.To[int64](45), ptr.To[int64](5), 5},
		{"a forced delete", "node-1", corev1.PodRunning, ptr.To[int64](45), ptr.To[int64](0), 0},
		{"no period anywhere", "node-1", corev1.PodRunning, nil, nil, 0},
		{"not scheduled: at once", "", corev1.PodPending, ptr.To[int64](45), ptr.To[int64](10), 0},
		{"succeeded: at once", "node-1", corev1.PodSucceeded, ptr.To[int64](45), nil, 0},
		{"failed: at once", "node-1", corev1.PodFailed, ptr.To[int64](45), ptr.To[int64](10), 0},
	}
	s := registry.NewStrategy(Pod)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := pod(func(p *corev1.Pod) {
				p.Spec.NodeName, p.Status.Phase, p.Spec.TerminationGracePeriodSeconds = tc.node, tc.phase, tc.own
			})
			opts := &metav1.DeleteOptions{GracePeriodSeconds: tc.request}
			if !s.CheckGracefulDelete(InNamespace("default"), p, opts) {
				t.Fatal("pod deletes are graceful")
			}
			if got := ptr.Deref(opts.GracePeriodSeconds, -1); got != tc.want {
				t.Errorf("grace period %d, want %d", got, tc.want)
			}
		})
	}
}

func TestPodTable(t *testing.T) {
	cols := []string{"Name", "Ready", "Status", "Restarts", "Age", "IP*", "Node*", "Nominated Node*", "Readiness Gates*"}
	ago := func(d time.Duration) metav1.Time { return metav1.NewTime(time.Now().Add(-d)) }
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	waiting := func(reason string) corev1.ContainerState {
		return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}
	}
	terminated := func(reason string, code int32) corev1.ContainerState {
		return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: reason, ExitCode: code}}
	}
	scheduled := func(p *corev1.Pod) {
		p.Spec.NodeName = "node-1"
		p.Status.PodIP = "10.244.1.7"
		p.Status.Phase = corev1.PodRunning
	}
	cases := []struct {
		name   string
		mutate func(*corev1.Pod)
		want   []any // Ready, Status, Restarts, IP, Node, Nominated Node, Readiness Gates
	}{
		{"pending", func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending },
			[]any{"0/1", "Pending", "0", "<none>", "<none>", "<none>", "<none>"}},
		{"nominated", func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodPending
			p.Status.NominatedNodeName = "node-2"
		}, []any{"0/1", "Pending", "0", "<none>", "<none>", "node-2", "<none>"}},
		{"running and ready", func(p *corev1.Pod) {
			scheduled(p)
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "nginx", Ready: true, State: running}}
		}, []any{"1/1", "Running", "0", "10.244.1.7", "node-1", "<none>", "<none>"}},
		{"running, one of two ready", func(p *corev1.Pod) {
			scheduled(p)
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "log", Image: "busybox"})
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "nginx", Ready: true, State: running}, {Name: "log", State: running}}
		}, []any{"1/2", "Running", "0", "10.244.1.7", "node-1", "<none>", "<none>"}},
		{"crash looping", func(p *corev1.Pod) {
			scheduled(p)
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "nginx", RestartCount: 4, State: waiting("CrashLoopBackOff"),
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, FinishedAt: ago(5 * time.Minute)}}}}
		}, []any{"0/1", "CrashLoopBackOff", "4 (5m ago)", "10.244.1.7", "node-1", "<none>", "<none>"}},
		{"restarts without a last termination", func(p *corev1.Pod) {
			scheduled(p)
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "nginx", RestartCount: 2, Ready: true, State: running}}
		}, []any{"1/1", "Running", "2", "10.244.1.7", "node-1", "<none>", "<none>"}},
		{"completed", func(p *corev1.Pod) {
			scheduled(p)
			p.Status.Phase = corev1.PodSucceeded
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "nginx", State: terminated("Completed", 0)}}
		}, []any{"0/1", "Completed", "0", "10.244.1.7", "node-1", "<none>", "<none>"}},
		{"one container completed, another running", func(p *corev1.Pod) {
			scheduled(p)
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "job", Image: "busybox"})
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "nginx", Ready: true, State: running}, {Name: "job", State: terminated("Completed", 0)}}
		}, []any{"1/2", "Running", "0", "10.244.1.7", "node-1", "<none>", "<none>"}},
		{"killed by a signal", func(p *corev1.Pod) {
			scheduled(p)
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "nginx", State: terminated("", 137)}}
		}, []any{"0/1", "ExitCode:137", "0", "10.244.1.7", "node-1", "<none>", "<none>"}},
		{"init container failed", func(p *corev1.Pod) {
			scheduled(p)
			p.Status.Phase = corev1.PodPending
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "setup", RestartCount: 1, State: terminated("Error", 1)}}
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "nginx", State: waiting("PodInitializing")}}
		}, []any{"0/1", "PodInitializing", "1", "10.244.1.7", "node-1", "<none>", "<none>"}},
		{"init container failed, no container status yet", func(p *corev1.Pod) {
			scheduled(p)
			p.Status.Phase = corev1.PodPending
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "setup", State: terminated("", 2)}}
		}, []any{"0/1", "Init:ExitCode:2", "0", "10.244.1.7", "node-1", "<none>", "<none>"}},
		{"init image not pulled", func(p *corev1.Pod) {
			scheduled(p)
			p.Status.Phase = corev1.PodPending
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "setup", State: waiting("ImagePullBackOff")}}
		}, []any{"0/1", "Init:ImagePullBackOff", "0", "10.244.1.7", "node-1", "<none>", "<none>"}},
		{"init container done", func(p *corev1.Pod) {
			scheduled(p)
			p.Status.Phase = corev1.PodPending
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "setup", State: terminated("Completed", 0)}}
		}, []any{"0/1", "Pending", "0", "10.244.1.7", "node-1", "<none>", "<none>"}},
		{"evicted", func(p *corev1.Pod) {
			scheduled(p)
			p.Status.Phase = corev1.PodFailed
			p.Status.Reason = "Evicted"
		}, []any{"0/1", "Evicted", "0", "10.244.1.7", "node-1", "<none>", "<none>"}},
		{"terminating", func(p *corev1.Pod) {
			scheduled(p)
			now := metav1.Now()
			p.DeletionTimestamp = &now
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "nginx", Ready: true, State: running}}
		}, []any{"1/1", "Terminating", "0", "10.244.1.7", "node-1", "<none>", "<none>"}},
		{"readiness gates", func(p *corev1.Pod) {
			scheduled(p)
			p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "example.com/lb"}, {ConditionType: "example.com/dns"}}
			p.Status.Conditions = []corev1.PodCondition{
				{Type: "example.com/lb", Status: corev1.ConditionTrue}, {Type: "example.com/dns", Status: corev1.ConditionFalse}}
		}, []any{"0/1", "Running", "0", "10.244.1.7", "node-1", "<none>", "1/2"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := pod(tc.mutate)
			p.CreationTimestamp = TwoDaysAgo()
			w := tc.want
			checkRow(t, Pod, p, cols, []any{"web", w[0], w[1], w[2], "2d", w[3], w[4], w[5], w[6]})
		})
	}
}

func TestPodFields(t *testing.T) {
	p := pod(func(p *corev1.Pod) {
		p.Spec.NodeName = "node-1"
		p.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
		p.Spec.SchedulerName = "default-scheduler"
		p.Spec.ServiceAccountName = "builder"
		p.Spec.HostNetwork = true
		p.Status.Phase = corev1.PodRunning
		p.Status.PodIP = "10.244.1.7"
		p.Status.NominatedNodeName = "node-2"
	})
	checkFields(t, Pod, p, map[string]string{
		"metadata.name": "web", "metadata.namespace": "default",
		"spec.nodeName": "node-1", "spec.restartPolicy": "OnFailure", "spec.schedulerName": "default-scheduler",
		"spec.serviceAccountName": "builder", "spec.hostNetwork": "true",
		"status.phase": "Running", "status.podIP": "10.244.1.7", "status.nominatedNodeName": "node-2",
	})
}

func TestBinding(t *testing.T) {
	unbound := func() *corev1.Pod {
		p := pod(nil)
		p.UID = "uid-web"
		p.Status.Phase = corev1.PodPending
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable"}}
		return p
	}
	binding := func(mutate func(*corev1.Binding)) *corev1.Binding {
		return Mutated(&corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
			Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}}, mutate)
	}
	isInvalid := func(paths ...string) func(error) bool {
		return func(err error) bool {
			var se *apierrors.StatusError
			if !apierrors.IsInvalid(err) || !errors.As(err, &se) {
				return false
			}
			var got []string
			for _, c := range se.ErrStatus.Details.Causes {
				got = append(got, c.Field)
			}
			slices.Sort(got)
			return slices.Equal(got, paths)
		}
	}
	cases := []struct {
		name   string
		pod    func(*corev1.Pod)
		url    string // the name in the request's path
		b      func(*corev1.Binding)
		dryRun bool
		check  func(error) bool
	}{
		{"bind", nil, "web", nil, false, nil},
		{"bind without a target kind", nil, "web", func(b *corev1.Binding) { b.Target.Kind = "" }, false, nil},
		{"bind with annotations", nil, "web", func(b *corev1.Binding) { b.Annotations = map[string]string{"placed-by": "test"} }, false, nil},
		{"bind the pod the UID names", nil, "web", func(b *corev1.Binding) { b.UID = "uid-web" }, false, nil},
		{"dry run", nil, "web", nil, true, nil},
		{"another name in the URL", nil, "db", nil, false, apierrors.IsBadRequest},
		{"to a pod", nil, "web", func(b *corev1.Binding) { b.Target.Kind = "Pod" }, false, isInvalid("target.kind")},
		{"to no node", nil, "web", func(b *corev1.Binding) { b.Target = corev1.ObjectReference{Kind: "Service"} },
			false, isInvalid("target.kind", "target.name")},
		{"already bound", func(p *corev1.Pod) { p.Spec.NodeName = "node-2" }, "web", nil, false, apierrors.IsConflict},
		{"being deleted", func(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.Now()) }, "web", nil, false, apierrors.IsConflict},
		{"another pod of that name", nil, "web", func(b *corev1.Binding) { b.UID = "uid-old" }, false, apierrors.IsConflict},
		{"no such pod", func(p *corev1.Pod) { p.Name = "other" }, "web", nil, false, apierrors.IsNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			store, ms := memStore(Pod, Mutated(unbound(), tc.pod))
			r := &BindingREST{Store: store}
			opts := &metav1.CreateOptions{}
			if tc.dryRun {
				opts.DryRun = []string{metav1.DryRunAll}
			}
			b := binding(tc.b)
			_, err := r.Create(InNamespace("default"), tc.url, b, nil, opts)
			stored := ms.objs["/pods/default/web"]
			if ExpectError(t, err, tc.check) || tc.dryRun {
				if stored != nil && stored.(*corev1.Pod).Spec.NodeName == "node-1" {
					t.Error("pod bound")
				}
				return
			}
			p := stored.(*corev1.Pod)
			if p.Spec.NodeName != "node-1" {
				t.Errorf("bound to %q", p.Spec.NodeName)
			}
			if len(p.Status.Conditions) != 1 || p.Status.Conditions[0].Type != corev1.PodScheduled ||
				p.Status.Conditions[0].Status != corev1.ConditionTrue {
				t.Errorf("conditions %+v, want one PodScheduled True", p.Status.Conditions)
			}
			for k, v := range b.Annotations {
				if p.Annotations[k] != v {
					t.Errorf("annotation %s = %q, want %q", k, p.Annotations[k], v)
				}
			}
		})
	}
}

func TestPodValidateUpdateAsKubernetes(t *testing.T) {
	notReady := corev1.Toleration{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists,
		Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)}
	gpu := corev1.Toleration{Key: "gpu", Operator: corev1.TolerationOpEqual, Value: "a100", Effect: corev1.TaintEffectNoSchedule}
	fixture := func(mutate func(*corev1.Pod)) *corev1.Pod {
		return Mutated(pod(func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{notReady, gpu}
			p.Spec.ActiveDeadlineSeconds = ptr.To[int64](600)
		}), mutate)
	}
	RunUpdate(t, Pod, fixture, []Case[*corev1.Pod]{
		{"a toleration added", func(p *corev1.Pod) {
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "spot", Operator: corev1.TolerationOpExists})
		}, nil},
		{"tolerations reordered", func(p *corev1.Pod) { p.Spec.Tolerations = []corev1.Toleration{gpu, notReady} }, nil},
		{"a toleration's seconds changed", func(p *corev1.Pod) { p.Spec.Tolerations[0].TolerationSeconds = ptr.To[int64](30) }, nil},
		{"a toleration's seconds removed", func(p *corev1.Pod) { p.Spec.Tolerations[0].TolerationSeconds = nil }, nil},
		{"a toleration removed", func(p *corev1.Pod) { p.Spec.Tolerations = p.Spec.Tolerations[:1] },
			[]string{Forbid("spec.tolerations")}},
		{"all tolerations removed", func(p *corev1.Pod) { p.Spec.Tolerations = nil }, []string{Forbid("spec.tolerations")}},
		{"a toleration's value changed", func(p *corev1.Pod) { p.Spec.Tolerations[1].Value = "h100" },
			[]string{Forbid("spec.tolerations")}},
		{"a shorter active deadline", func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr.To[int64](60) }, nil},
		{"the same active deadline", func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr.To[int64](600) }, nil},
		{"a longer active deadline", func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr.To[int64](601) },
			[]string{Inv("spec.activeDeadlineSeconds")}},
		{"the active deadline removed", func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = nil },
			[]string{Inv("spec.activeDeadlineSeconds")}},
		{"a new grace period", func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](60) },
			[]string{Forbid("spec")}},
		{"grace period 1", func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1) },
			[]string{Forbid("spec")}},
	})
	// An active deadline may be set on a pod that had none.
	RunUpdate(t, Pod, pod, []Case[*corev1.Pod]{
		{"an active deadline set", func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr.To[int64](30) }, nil},
	})
	// A negative grace period (stored before it was refused) may become 1
	// and nothing else.
	negative := func(mutate func(*corev1.Pod)) *corev1.Pod {
		return Mutated(pod(func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](-1) }), mutate)
	}
	for _, tc := range []struct {
		name   string
		period int64
		want   []string
	}{
		{"negative grace period to 1", 1, nil},
		{"negative grace period to 0", 0, []string{Forbid("spec")}},
		{"negative grace period to 30", 30, []string{Forbid("spec")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := negative(nil)
			obj := negative(func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To(tc.period) })
			s := registry.NewStrategy(Pod)
			s.PrepareForUpdate(InNamespace("default"), obj, old)
			CheckErrors(t, Pod.ValidateUpdate(InNamespace("default"), obj, old), tc.want...)
		})
	}
}
