package registry

import (
	"k8s.io/apimachinery/pkg/api/meta"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// NameFunc validates a name (or a generateName prefix).
type NameFunc = apimachineryvalidation.ValidateNameFunc

// Name validators of the kinds, as kube-apiserver uses them.
var (
	DNS1123Label  NameFunc = apimachineryvalidation.NameIsDNSLabel
	DNS1123Domain NameFunc = apimachineryvalidation.NameIsDNSSubdomain
)

// ValidateMeta checks obj's metadata with the kind's name rule.
func ValidateMeta(obj runtime.Object, namespaced bool, name NameFunc) field.ErrorList {
	m, err := meta.Accessor(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("metadata"), err)}
	}
	return apimachineryvalidation.ValidateObjectMetaAccessor(m, namespaced, name, field.NewPath("metadata"))
}
