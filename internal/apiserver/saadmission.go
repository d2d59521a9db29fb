package apiserver

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/utils/ptr"
)

// ServiceAccountMountPath is where a pod finds its ServiceAccount's
// token, the cluster CA and its namespace (what in-cluster clients read).
const ServiceAccountMountPath = "/var/run/secrets/kubernetes.io/serviceaccount"

// serviceAccountAdmission is kube-apiserver's ServiceAccount admission
// plugin for pods: a pod runs as the "default" ServiceAccount unless it
// names one, which must exist; unless automounting is turned off (by the
// pod or its ServiceAccount) every container gets a projected volume with
// a token bound to the pod, the CA and the namespace at
// ServiceAccountMountPath.
type serviceAccountAdmission struct {
	*admission.Handler
	lister corelisters.ServiceAccountLister
	// wait is how long a missing "default" ServiceAccount is waited for:
	// a namespace just created gets it a moment later.
	wait time.Duration
}

var _ admission.MutationInterface = (*serviceAccountAdmission)(nil)

func newServiceAccountAdmission(f informers.SharedInformerFactory) *serviceAccountAdmission {
	inf := f.Core().V1().ServiceAccounts()
	p := &serviceAccountAdmission{Handler: admission.NewHandler(admission.Create), lister: inf.Lister(), wait: 3 * time.Second}
	p.SetReadyFunc(inf.Informer().HasSynced)
	return p
}

// Admit implements admission.MutationInterface.
func (p *serviceAccountAdmission) Admit(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().GroupResource() != corev1.Resource("pods") || a.GetSubresource() != "" {
		return nil
	}
	pod, ok := a.GetObject().(*corev1.Pod)
	if !ok {
		return nil
	}
	// Mirror pods (of static pods) get nothing from the API.
	if _, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return nil
	}
	if pod.Spec.ServiceAccountName == "" {
		pod.Spec.ServiceAccountName = "default"
	}
	pod.Spec.DeprecatedServiceAccount = pod.Spec.ServiceAccountName
	sa, err := p.lookup(ctx, a.GetNamespace(), pod.Spec.ServiceAccountName)
	if err != nil {
		return admission.NewForbidden(a, fmt.Errorf("error looking up service account %s/%s: %w", a.GetNamespace(), pod.Spec.ServiceAccountName, err))
	}
	automount := true
	switch {
	case pod.Spec.AutomountServiceAccountToken != nil:
		automount = *pod.Spec.AutomountServiceAccountToken
	case sa.AutomountServiceAccountToken != nil:
		automount = *sa.AutomountServiceAccountToken
	}
	if automount {
		mountServiceAccount(pod)
	}
	return nil
}

func (p *serviceAccountAdmission) lookup(ctx context.Context, ns, name string) (*corev1.ServiceAccount, error) {
	sa, err := p.lister.ServiceAccounts(ns).Get(name)
	if !apierrors.IsNotFound(err) || name != "default" {
		return sa, err
	}
	_ = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, p.wait, false, func(context.Context) (bool, error) {
		sa, err = p.lister.ServiceAccounts(ns).Get(name)
		return err == nil, nil
	})
	return sa, err
}

// mountServiceAccount adds the projected volume and mounts it in every
// container that has nothing at the path already.
func mountServiceAccount(pod *corev1.Pod) {
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			for _, m := range c.VolumeMounts {
				if m.MountPath == ServiceAccountMountPath {
					return // the pod brings its own
				}
			}
		}
	}
	name := "kube-api-access-" + utilrand.String(5)
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
		Projected: &corev1.ProjectedVolumeSource{
			DefaultMode: ptr.To[int32](0o644),
			Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3607)}},
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
					Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
				{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace",
					FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
			},
		},
	}})
	mount := corev1.VolumeMount{Name: name, ReadOnly: true, MountPath: ServiceAccountMountPath}
	for i := range pod.Spec.InitContainers {
		pod.Spec.InitContainers[i].VolumeMounts = append(pod.Spec.InitContainers[i].VolumeMounts, mount)
	}
	for i := range pod.Spec.Containers {
		pod.Spec.Containers[i].VolumeMounts = append(pod.Spec.Containers[i].VolumeMounts, mount)
	}
}
