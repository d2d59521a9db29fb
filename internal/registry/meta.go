package registry

import (
	"k8s.io/apimachinery/pkg/api/meta"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
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

// InvalidEach reports each message of a value check (the Is* functions
// of k8s.io/apimachinery/pkg/util/validation) as an Invalid error of
// value at path; none when the check passed.
func InvalidEach(path *field.Path, value any, msgs []string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range msgs {
		errs = append(errs, field.Invalid(path, value, msg))
	}
	return errs
}

// UniqueName checks a name that must be unique in its list (containers,
// ports): valid by check and not among the names seen before it, which
// it is added to.
func UniqueName(path *field.Path, name string, check func(string) []string, seen sets.Set[string]) field.ErrorList {
	errs := InvalidEach(path, name, check(name))
	if seen.Has(name) {
		errs = append(errs, field.Duplicate(path, name))
	}
	seen.Insert(name)
	return errs
}
