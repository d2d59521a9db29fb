package apiserver

import (
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/version"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/tools/cache"
)

// crdDiscovery lists the groups of CustomResourceDefinitions in the
// unaggregated /apis document too (kube-apiserver's aggregator does it
// there), for clients that do not ask for aggregated discovery.
func crdDiscovery(s *genericapiserver.GenericAPIServer, f apiextensionsinformers.SharedInformerFactory) genericapiserver.PostStartHookFunc {
	return func(ctx genericapiserver.PostStartHookContext) error {
		inf := f.Apiextensions().V1().CustomResourceDefinitions()
		lister := inf.Lister()
		sync := func(group string) {
			crds, _ := lister.List(labels.Everything())
			versions := map[string]bool{}
			for _, crd := range crds {
				if crd.Spec.Group != group || !established(crd) {
					continue
				}
				for _, v := range crd.Spec.Versions {
					if v.Served {
						versions[v.Name] = true
					}
				}
			}
			if len(versions) == 0 {
				s.DiscoveryGroupManager.RemoveGroup(group)
				return
			}
			var names []string
			for v := range versions {
				names = append(names, v)
			}
			sort.Slice(names, func(i, j int) bool { return version.CompareKubeAwareVersionStrings(names[i], names[j]) > 0 })
			g := metav1.APIGroup{Name: group}
			for _, v := range names {
				g.Versions = append(g.Versions, metav1.GroupVersionForDiscovery{GroupVersion: group + "/" + v, Version: v})
			}
			g.PreferredVersion = g.Versions[0]
			s.DiscoveryGroupManager.AddGroup(g)
		}
		onCRD := func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok {
				sync(crd.Spec.Group)
			}
		}
		_, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: onCRD, UpdateFunc: func(_, n any) { onCRD(n) }, DeleteFunc: onCRD,
		})
		return err
	}
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}
