package controller

import (
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
)

// Lookup reads the object a queue key (namespace/name) names through
// namespaced, a lister's accessor of one namespace such as
// DaemonSetLister.DaemonSets. gone is true, with a nil error, when the
// cache does not hold the object (it was deleted) or the key cannot name
// one: retrying would not change either. err is any other failure of the
// lister, worth a retry.
func Lookup[T any, N interface{ Get(name string) (T, error) }](key string, namespaced func(namespace string) N) (obj T, gone bool, err error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return obj, true, nil
	}
	obj, err = namespaced(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return obj, true, nil
	}
	return obj, false, err
}
