package apiserver

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

func TestServiceAccountAdmission(t *testing.T) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, sa := range []*corev1.ServiceAccount{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "default"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "quiet"}, AutomountServiceAccountToken: ptr.To(false)},
	} {
		if err := idx.Add(sa); err != nil {
			t.Fatal(err)
		}
	}
	p := &serviceAccountAdmission{Handler: admission.NewHandler(admission.Create), lister: corelisters.NewServiceAccountLister(idx), wait: 100 * time.Millisecond}
	ctr := func(name string, mounts ...corev1.VolumeMount) corev1.Container {
		return corev1.Container{Name: name, Image: "host", VolumeMounts: mounts}
	}
	for _, tc := range []struct {
		name      string
		ns        string
		spec      corev1.PodSpec
		wantSA    string
		mounted   bool
		wantError string
	}{
		{name: "default ServiceAccount, mounted in every container", ns: "team",
			spec: corev1.PodSpec{InitContainers: []corev1.Container{ctr("init")}, Containers: []corev1.Container{ctr("a"), ctr("b")}}, wantSA: "default", mounted: true},
		{name: "the pod turns automounting off", ns: "team",
			spec: corev1.PodSpec{AutomountServiceAccountToken: ptr.To(false), Containers: []corev1.Container{ctr("a")}}, wantSA: "default"},
		{name: "the ServiceAccount turns it off", ns: "team",
			spec: corev1.PodSpec{ServiceAccountName: "quiet", Containers: []corev1.Container{ctr("a")}}, wantSA: "quiet"},
		{name: "the pod overrides its ServiceAccount", ns: "team",
			spec: corev1.PodSpec{ServiceAccountName: "quiet", AutomountServiceAccountToken: ptr.To(true), Containers: []corev1.Container{ctr("a")}}, wantSA: "quiet", mounted: true},
		{name: "the pod mounts its own at the path", ns: "team",
			spec: corev1.PodSpec{Containers: []corev1.Container{ctr("a", corev1.VolumeMount{Name: "mine", MountPath: ServiceAccountMountPath})}}, wantSA: "default"},
		{name: "a missing ServiceAccount", ns: "team",
			spec: corev1.PodSpec{ServiceAccountName: "ghost", Containers: []corev1.Container{ctr("a")}}, wantError: `error looking up service account team/ghost`},
		{name: "a namespace without its default one yet", ns: "fresh",
			spec: corev1.PodSpec{Containers: []corev1.Container{ctr("a")}}, wantError: `error looking up service account fresh/default`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: tc.ns, Name: "p"}, Spec: tc.spec}
			attrs := admission.NewAttributesRecord(pod, nil, corev1.SchemeGroupVersion.WithKind("Pod"), tc.ns, "p",
				corev1.SchemeGroupVersion.WithResource("pods"), "", admission.Create, &metav1.CreateOptions{}, false, &user.DefaultInfo{Name: "u"})
			err := p.Admit(context.Background(), attrs, nil)
			if tc.wantError != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantError) {
					t.Fatalf("err = %v, want %q", err, tc.wantError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if pod.Spec.ServiceAccountName != tc.wantSA {
				t.Errorf("serviceAccountName = %q", pod.Spec.ServiceAccountName)
			}
			var vol string
			for _, v := range pod.Spec.Volumes {
				if strings.HasPrefix(v.Name, "kube-api-access-") && v.Projected != nil && len(v.Projected.Sources) == 3 {
					vol = v.Name
				}
			}
			if (vol != "") != tc.mounted {
				t.Fatalf("projected volume %q, want mounted=%v", vol, tc.mounted)
			}
			for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
				has := false
				for _, m := range c.VolumeMounts {
					has = has || (m.Name == vol && m.MountPath == ServiceAccountMountPath && m.ReadOnly)
				}
				if has != tc.mounted {
					t.Errorf("container %s: mounted=%v", c.Name, has)
				}
			}
		})
	}
}
