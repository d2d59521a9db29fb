package core

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
	storeerr "k8s.io/apiserver/pkg/storage/errors"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/registry"
)

// Pod describes core/v1 Pods.
var Pod = &registry.Kind{
	Resource:   schema.GroupResource{Resource: "pods"},
	Singular:   "pod",
	Version:    "v1",
	Namespaced: true,
	New:        func() runtime.Object { return &corev1.Pod{} },
	NewList:    func() runtime.Object { return &corev1.PodList{} },
	ShortNames: []string{"po"},
	Categories: []string{"all"},
	Status:     true,
	PrepareForCreate: func(_ context.Context, obj runtime.Object) {
		pod := obj.(*corev1.Pod)
		pod.Status = corev1.PodStatus{Phase: corev1.PodPending, QOSClass: qosClass(&pod.Spec)}
		if pod.Spec.ServiceAccountName == "" {
			pod.Spec.ServiceAccountName = "default"
		}
		pod.Spec.DeprecatedServiceAccount = pod.Spec.ServiceAccountName
		pod.Spec.Tolerations = DefaultTolerations(pod.Spec.Tolerations)
	},
	Validate: func(_ context.Context, obj runtime.Object) field.ErrorList {
		pod := obj.(*corev1.Pod)
		errs := registry.ValidateMeta(pod, true, registry.DNS1123Domain)
		return append(errs, ValidatePodSpec(&pod.Spec, field.NewPath("spec"))...)
	},
	ValidateUpdate: func(_ context.Context, obj, old runtime.Object) field.ErrorList {
		return validatePodUpdate(obj.(*corev1.Pod), old.(*corev1.Pod))
	},
	ValidateStatusUpdate: func(_ context.Context, obj, old runtime.Object) field.ErrorList {
		pod, oldPod := obj.(*corev1.Pod), old.(*corev1.Pod)
		var errs field.ErrorList
		if oldPod.Status.Phase == corev1.PodSucceeded || oldPod.Status.Phase == corev1.PodFailed {
			if pod.Status.Phase != oldPod.Status.Phase {
				errs = append(errs, field.Forbidden(field.NewPath("status", "phase"), "may not change from a terminal phase"))
			}
		}
		return errs
	},
	Fields: func(obj runtime.Object) fields.Set {
		pod := obj.(*corev1.Pod)
		return fields.Set{
			"spec.nodeName":            pod.Spec.NodeName,
			"spec.restartPolicy":       string(pod.Spec.RestartPolicy),
			"spec.schedulerName":       pod.Spec.SchedulerName,
			"spec.serviceAccountName":  pod.Spec.ServiceAccountName,
			"spec.hostNetwork":         fmt.Sprint(pod.Spec.HostNetwork),
			"status.phase":             string(pod.Status.Phase),
			"status.podIP":             pod.Status.PodIP,
			"status.nominatedNodeName": pod.Status.NominatedNodeName,
		}
	},
	GracefulDelete: func(_ context.Context, obj runtime.Object, options *metav1.DeleteOptions) bool {
		pod := obj.(*corev1.Pod)
		var period int64
		switch {
		case options.GracePeriodSeconds != nil:
			period = *options.GracePeriodSeconds
		case pod.Spec.TerminationGracePeriodSeconds != nil:
			period = *pod.Spec.TerminationGracePeriodSeconds
		}
		// A pod no node runs, or that has finished, goes at once.
		if pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			period = 0
		}
		options.GracePeriodSeconds = &period
		return true
	},
	Table: &registry.Table{
		Columns: []registry.Column{
			{Name: "Ready", Description: "The aggregate readiness state of this pod for accepting traffic."},
			{Name: "Status", Description: "The aggregate status of the containers in this pod."},
			{Name: "Restarts", Description: "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."},
			registry.AgeColumn,
			{Name: "IP", Wide: true, Description: "The IP address assigned to the pod."},
			{Name: "Node", Wide: true, Description: "The node the pod is assigned to."},
			{Name: "Nominated Node", Wide: true, Description: "The node the pod is nominated to run on."},
			{Name: "Readiness Gates", Wide: true, Description: "The pod's readiness gates."},
		},
		Row: podRow,
	},
}

func validatePodUpdate(pod, old *corev1.Pod) field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	// As kube-apiserver: the active deadline may be set, or lowered, but
	// neither raised nor removed.
	switch n, o := pod.Spec.ActiveDeadlineSeconds, old.Spec.ActiveDeadlineSeconds; {
	case n == nil && o != nil:
		errs = append(errs, field.Invalid(spec.Child("activeDeadlineSeconds"), n, "must not update from a positive integer to nil value"))
	case n != nil && o != nil && *n > *o:
		errs = append(errs, field.Invalid(spec.Child("activeDeadlineSeconds"), *n, "must be less than or equal to previous value"))
	}
	errs = append(errs, validateOnlyAddedTolerations(pod.Spec.Tolerations, old.Spec.Tolerations, spec.Child("tolerations"))...)

	// Only images, the active deadline and added tolerations may change in
	// a running pod's spec, and a negative grace period may become 1, as
	// in Kubernetes.
	mutable := old.Spec.DeepCopy()
	for i := range mutable.Containers {
		if i < len(pod.Spec.Containers) {
			mutable.Containers[i].Image = pod.Spec.Containers[i].Image
		}
	}
	for i := range mutable.InitContainers {
		if i < len(pod.Spec.InitContainers) {
			mutable.InitContainers[i].Image = pod.Spec.InitContainers[i].Image
		}
	}
	mutable.ActiveDeadlineSeconds = pod.Spec.ActiveDeadlineSeconds
	mutable.Tolerations = pod.Spec.Tolerations
	if o, n := old.Spec.TerminationGracePeriodSeconds, pod.Spec.TerminationGracePeriodSeconds; o != nil && *o < 0 && n != nil && *n == 1 {
		mutable.TerminationGracePeriodSeconds = n
	}
	if !apiequality.Semantic.DeepEqual(mutable, &pod.Spec) {
		errs = append(errs, field.Forbidden(spec,
			"pod updates may not change fields other than `spec.containers[*].image`, `spec.initContainers[*].image`, "+
				"`spec.activeDeadlineSeconds`, `spec.tolerations` (only additions to existing tolerations) or "+
				"`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"))
	}
	return errs
}

// validateOnlyAddedTolerations refuses an update that drops or changes a
// toleration the pod had, but for its tolerationSeconds.
func validateOnlyAddedTolerations(tols, old []corev1.Toleration, path *field.Path) field.ErrorList {
	for _, o := range old {
		o.TolerationSeconds = nil
		kept := slices.ContainsFunc(tols, func(n corev1.Toleration) bool {
			n.TolerationSeconds = nil
			return apiequality.Semantic.DeepEqual(o, n)
		})
		if !kept {
			return field.ErrorList{field.Forbidden(path, "existing toleration can not be modified except its tolerationSeconds")}
		}
	}
	return nil
}

func qosClass(spec *corev1.PodSpec) corev1.PodQOSClass {
	hasResources, guaranteed := false, true
	for _, c := range spec.Containers {
		if len(c.Resources.Requests) > 0 || len(c.Resources.Limits) > 0 {
			hasResources = true
		}
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			l, ok := c.Resources.Limits[r]
			q, hasReq := c.Resources.Requests[r]
			if !ok || (hasReq && q.Cmp(l) != 0) {
				guaranteed = false
			}
		}
	}
	switch {
	case !hasResources:
		return corev1.PodQOSBestEffort
	case guaranteed:
		return corev1.PodQOSGuaranteed
	}
	return corev1.PodQOSBurstable
}

// podRow prints a pod as kubectl does: READY, STATUS with the reason of
// the most telling container, RESTARTS with the last restart's age.
func podRow(obj runtime.Object) []any {
	pod := obj.(*corev1.Pod)
	total := len(pod.Spec.Containers)
	ready, restarts := 0, 0
	var lastRestart time.Time
	reason := string(pod.Status.Phase)
	if pod.Status.Reason != "" {
		reason = pod.Status.Reason
	}
	for i := len(pod.Status.InitContainerStatuses) - 1; i >= 0; i-- {
		cs := pod.Status.InitContainerStatuses[i]
		restarts += int(cs.RestartCount)
		switch {
		case cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0:
		case cs.State.Terminated != nil:
			reason = "Init:" + nonEmpty(cs.State.Terminated.Reason, fmt.Sprintf("ExitCode:%d", cs.State.Terminated.ExitCode))
		case cs.State.Waiting != nil && cs.State.Waiting.Reason != "" && cs.State.Waiting.Reason != "PodInitializing":
			reason = "Init:" + cs.State.Waiting.Reason
		}
	}
	hasRunning := false
	for i := len(pod.Status.ContainerStatuses) - 1; i >= 0; i-- {
		cs := pod.Status.ContainerStatuses[i]
		restarts += int(cs.RestartCount)
		if t := cs.LastTerminationState.Terminated; t != nil && t.FinishedAt.After(lastRestart) {
			lastRestart = t.FinishedAt.Time
		}
		switch {
		case cs.State.Waiting != nil && cs.State.Waiting.Reason != "":
			reason = cs.State.Waiting.Reason
		case cs.State.Terminated != nil && cs.State.Terminated.Reason != "":
			reason = cs.State.Terminated.Reason
		case cs.State.Terminated != nil:
			reason = fmt.Sprintf("ExitCode:%d", cs.State.Terminated.ExitCode)
		case cs.Ready && cs.State.Running != nil:
			hasRunning = true
			ready++
		case cs.State.Running != nil:
			hasRunning = true
		}
	}
	if reason == "Completed" && hasRunning {
		reason = "Running"
	}
	if pod.DeletionTimestamp != nil {
		reason = "Terminating"
	}
	restartCol := fmt.Sprint(restarts)
	if restarts > 0 && !lastRestart.IsZero() {
		restartCol = fmt.Sprintf("%d (%s ago)", restarts, registry.Age(metav1.NewTime(lastRestart)))
	}
	ip := "<none>"
	if pod.Status.PodIP != "" {
		ip = pod.Status.PodIP
	}
	node := nonEmpty(pod.Spec.NodeName, "<none>")
	nominated := nonEmpty(pod.Status.NominatedNodeName, "<none>")
	gates := "<none>"
	if n := len(pod.Spec.ReadinessGates); n > 0 {
		passed := 0
		for _, g := range pod.Spec.ReadinessGates {
			for _, c := range pod.Status.Conditions {
				if c.Type == g.ConditionType && c.Status == corev1.ConditionTrue {
					passed++
				}
			}
		}
		gates = fmt.Sprintf("%d/%d", passed, n)
	}
	return []any{fmt.Sprintf("%d/%d", ready, total), reason, restartCol, registry.CreationAge(pod), ip, node, nominated, gates}
}

func nonEmpty(s, dflt string) string {
	if s == "" {
		return dflt
	}
	return s
}

// BindingREST serves pods/binding: the scheduler's way to place a pod.
type BindingREST struct {
	Store *genericregistry.Store
}

func (r *BindingREST) New() runtime.Object     { return &corev1.Binding{} }
func (r *BindingREST) Destroy()                {}
func (r *BindingREST) NamespaceScoped() bool   { return true }
func (r *BindingREST) GetSingularName() string { return "binding" }

// Create binds the pod named in the binding to its target node.
func (r *BindingREST) Create(ctx context.Context, name string, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	b := obj.(*corev1.Binding)
	if name != b.Name {
		return nil, apierrors.NewBadRequest("name in URL does not match name in Binding object")
	}
	var errs field.ErrorList
	if b.Target.Kind != "" && b.Target.Kind != "Node" {
		errs = append(errs, field.NotSupported(field.NewPath("target", "kind"), b.Target.Kind, []string{"Node", "<empty>"}))
	}
	if b.Target.Name == "" {
		errs = append(errs, field.Required(field.NewPath("target", "name"), ""))
	}
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Binding"}, b.Name, errs)
	}
	if createValidation != nil {
		if err := createValidation(ctx, obj.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	key, err := r.Store.KeyFunc(ctx, b.Name)
	if err != nil {
		return nil, err
	}
	if len(options.DryRun) > 0 {
		return &metav1.Status{Status: metav1.StatusSuccess}, nil
	}
	err = r.Store.Storage.GuaranteedUpdate(ctx, key, &corev1.Pod{}, false, nil,
		storage.SimpleUpdate(func(obj runtime.Object) (runtime.Object, error) {
			pod := obj.(*corev1.Pod)
			if pod.DeletionTimestamp != nil {
				return nil, apierrors.NewConflict(Pod.Resource, pod.Name, fmt.Errorf("pod %s is being deleted, cannot be assigned to a host", pod.Name))
			}
			if pod.Spec.NodeName != "" {
				return nil, apierrors.NewConflict(Pod.Resource, pod.Name, fmt.Errorf("pod %s is already assigned to node %q", pod.Name, pod.Spec.NodeName))
			}
			if b.UID != "" && b.UID != pod.UID {
				return nil, apierrors.NewConflict(Pod.Resource, pod.Name, fmt.Errorf("the UID in the binding does not match the pod"))
			}
			pod.Spec.NodeName = b.Target.Name
			setPodCondition(pod, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue,
				LastTransitionTime: metav1.Now()})
			for k, v := range b.Annotations {
				if pod.Annotations == nil {
					pod.Annotations = map[string]string{}
				}
				pod.Annotations[k] = v
			}
			return pod, nil
		}), false, nil)
	if err != nil {
		// A missing pod is a 404, as kube-apiserver answers, not a
		// storage error (a 500).
		return nil, storeerr.InterpretUpdateError(err, Pod.Resource, b.Name)
	}
	return &metav1.Status{Status: metav1.StatusSuccess, Code: 201}, nil
}

func setPodCondition(pod *corev1.Pod, c corev1.PodCondition) {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == c.Type {
			pod.Status.Conditions[i] = c
			return
		}
	}
	pod.Status.Conditions = append(pod.Status.Conditions, c)
}

// DefaultTolerationSeconds is how long a pod stays on a node that is not
// ready or unreachable before the node lifecycle controller evicts it,
// unless the pod says otherwise: kube-apiserver's DefaultTolerationSeconds
// admission plugin and its default of 300 s (its flags to change it are
// not offered).
const DefaultTolerationSeconds = 300

// DefaultTolerations is tols with a NoExecute toleration of the not-ready
// and unreachable taints for DefaultTolerationSeconds added for each the
// pod has no toleration of yet. As in Kubernetes' plugin, a toleration
// counts by key (or no key) and effect (NoExecute or none), whatever its
// operator and value.
func DefaultTolerations(tols []corev1.Toleration) []corev1.Toleration {
	for _, key := range []string{corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable} {
		has := slices.ContainsFunc(tols, func(t corev1.Toleration) bool {
			return (t.Key == key || t.Key == "") && (t.Effect == corev1.TaintEffectNoExecute || t.Effect == "")
		})
		if !has {
			tols = append(tols, corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists,
				Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](DefaultTolerationSeconds)})
		}
	}
	return tols
}
