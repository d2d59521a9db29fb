//lint:file-ignore SA1019 svcnet serves the v1 Endpoints API, deprecated in Kubernetes 1.33 but still served there too

package core

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
)

// maxSecretSize is the largest Secret or ConfigMap payload (1 MiB).
const maxSecretSize = 1 << 20

// Endpoints describes core/v1 Endpoints.
var Endpoints = &registry.Kind{
	Resource:   schema.GroupResource{Resource: "endpoints"},
	Singular:   "endpoints",
	Version:    "v1",
	Namespaced: true,
	New:        func() runtime.Object { return &corev1.Endpoints{} },
	NewList:    func() runtime.Object { return &corev1.EndpointsList{} },
	ShortNames: []string{"ep"},
	Validate: func(_ context.Context, obj runtime.Object) field.ErrorList {
		ep := obj.(*corev1.Endpoints)
		errs := registry.ValidateMeta(ep, true, registry.DNS1123Domain)
		for i, ss := range ep.Subsets {
			sp := field.NewPath("subsets").Index(i)
			for j, a := range ss.Addresses {
				errs = append(errs, validateEndpointIP(a.IP, sp.Child("addresses").Index(j).Child("ip"))...)
			}
			for j, a := range ss.NotReadyAddresses {
				errs = append(errs, validateEndpointIP(a.IP, sp.Child("notReadyAddresses").Index(j).Child("ip"))...)
			}
			for j, p := range ss.Ports {
				pp := sp.Child("ports").Index(j)
				errs = append(errs, registry.InvalidEach(pp.Child("port"), p.Port, validation.IsValidPortNum(int(p.Port)))...)
				if !protocols.Has(p.Protocol) {
					errs = append(errs, field.NotSupported(pp.Child("protocol"), p.Protocol, []corev1.Protocol{"SCTP", "TCP", "UDP"}))
				}
				if len(ss.Ports) > 1 && p.Name == "" {
					errs = append(errs, field.Required(pp.Child("name"), ""))
				}
			}
		}
		return errs
	},
	Table: &registry.Table{
		Columns: []registry.Column{
			{Name: "Endpoints", Description: "Endpoints of the service"},
			registry.AgeColumn,
		},
		Row: func(obj runtime.Object) []any {
			ep := obj.(*corev1.Endpoints)
			var list registry.Abbrev
			for _, ss := range ep.Subsets {
				for _, a := range ss.Addresses {
					if len(ss.Ports) == 0 {
						list.Add(a.IP)
					}
					for _, p := range ss.Ports {
						list.Add(fmt.Sprintf("%s:%d", a.IP, p.Port))
					}
				}
			}
			return []any{list.String("<none>"), registry.CreationAge(ep)}
		},
	},
}

func validateEndpointIP(ip string, path *field.Path) field.ErrorList {
	a, err := netip.ParseAddr(ip)
	switch {
	case err != nil:
		return field.ErrorList{field.Invalid(path, ip, "must be a valid IP address")}
	case a.IsUnspecified() || a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast():
		return field.ErrorList{field.Invalid(path, ip, "may not be unspecified, loopback or link-local")}
	}
	return nil
}

// Secret describes core/v1 Secrets.
var Secret = &registry.Kind{
	Resource:   schema.GroupResource{Resource: "secrets"},
	Singular:   "secret",
	Version:    "v1",
	Namespaced: true,
	New:        func() runtime.Object { return &corev1.Secret{} },
	NewList:    func() runtime.Object { return &corev1.SecretList{} },
	PrepareForCreate: func(_ context.Context, obj runtime.Object) {
		mergeStringData(obj.(*corev1.Secret))
	},
	PrepareForUpdate: func(_ context.Context, obj, _ runtime.Object) {
		mergeStringData(obj.(*corev1.Secret))
	},
	Validate: func(_ context.Context, obj runtime.Object) field.ErrorList {
		sec := obj.(*corev1.Secret)
		errs := registry.ValidateMeta(sec, true, registry.DNS1123Domain)
		errs = append(errs, validateDataKeys(sec.Data, field.NewPath("data"))...)
		size := dataSize(sec.Data)
		if size > maxSecretSize {
			errs = append(errs, field.TooLong(field.NewPath("data"), "", maxSecretSize))
		}
		required := map[corev1.SecretType][]string{
			corev1.SecretTypeTLS:              {corev1.TLSCertKey, corev1.TLSPrivateKeyKey},
			corev1.SecretTypeDockerConfigJson: {corev1.DockerConfigJsonKey},
			corev1.SecretTypeBasicAuth:        nil,
		}
		for _, k := range required[sec.Type] {
			if _, ok := sec.Data[k]; !ok {
				errs = append(errs, field.Required(field.NewPath("data").Key(k), ""))
			}
		}
		return errs
	},
	ValidateUpdate: func(_ context.Context, obj, old runtime.Object) field.ErrorList {
		return validateImmutableData(obj.(*corev1.Secret).Immutable, old.(*corev1.Secret).Immutable,
			obj.(*corev1.Secret).Data, old.(*corev1.Secret).Data, nil, nil,
			obj.(*corev1.Secret).Type, old.(*corev1.Secret).Type)
	},
	Fields: func(obj runtime.Object) fields.Set {
		return fields.Set{"type": string(obj.(*corev1.Secret).Type)}
	},
	Table: &registry.Table{
		Columns: []registry.Column{
			{Name: "Type", Description: "Used to facilitate programmatic handling of secret data."},
			{Name: "Data", Type: "string", Description: "Contains the secret data."},
			registry.AgeColumn,
		},
		Row: func(obj runtime.Object) []any {
			sec := obj.(*corev1.Secret)
			return []any{string(sec.Type), int64(len(sec.Data)), registry.CreationAge(sec)}
		},
	},
}

// ConfigMap describes core/v1 ConfigMaps.
var ConfigMap = &registry.Kind{
	Resource:   schema.GroupResource{Resource: "configmaps"},
	Singular:   "configmap",
	Version:    "v1",
	Namespaced: true,
	New:        func() runtime.Object { return &corev1.ConfigMap{} },
	NewList:    func() runtime.Object { return &corev1.ConfigMapList{} },
	ShortNames: []string{"cm"},
	Validate: func(_ context.Context, obj runtime.Object) field.ErrorList {
		cm := obj.(*corev1.ConfigMap)
		errs := registry.ValidateMeta(cm, true, registry.DNS1123Domain)
		errs = append(errs, validateDataKeys(cm.Data, field.NewPath("data"))...)
		errs = append(errs, validateDataKeys(cm.BinaryData, field.NewPath("binaryData"))...)
		for k := range cm.BinaryData {
			if _, dup := cm.Data[k]; dup {
				errs = append(errs, field.Invalid(field.NewPath("binaryData").Key(k), k, "duplicate of key present in data"))
			}
		}
		size := dataSize(cm.Data) + dataSize(cm.BinaryData)
		if size > maxSecretSize {
			errs = append(errs, field.TooLong(field.NewPath(""), "", maxSecretSize))
		}
		return errs
	},
	ValidateUpdate: func(_ context.Context, obj, old runtime.Object) field.ErrorList {
		cm, o := obj.(*corev1.ConfigMap), old.(*corev1.ConfigMap)
		return validateImmutableData(cm.Immutable, o.Immutable, cm.Data, o.Data, cm.BinaryData, o.BinaryData, "", "")
	},
	Table: &registry.Table{
		Columns: []registry.Column{
			{Name: "Data", Type: "string", Description: "Contains the configuration data."},
			registry.AgeColumn,
		},
		Row: func(obj runtime.Object) []any {
			cm := obj.(*corev1.ConfigMap)
			return []any{int64(len(cm.Data) + len(cm.BinaryData)), registry.CreationAge(cm)}
		},
	},
}

// mergeStringData folds a Secret's stringData into data on every write:
// stringData is write-only and never stored.
func mergeStringData(sec *corev1.Secret) {
	for k, v := range sec.StringData {
		if sec.Data == nil {
			sec.Data = map[string][]byte{}
		}
		sec.Data[k] = []byte(v)
	}
	sec.StringData = nil
}

// validateDataKeys checks the keys of a Secret's or ConfigMap's data
// maps: each must be a valid file name in a volume.
func validateDataKeys[V string | []byte](data map[string]V, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for k := range data {
		errs = append(errs, registry.InvalidEach(path.Key(k), k, validation.IsConfigMapKey(k))...)
	}
	return errs
}

// dataSize is the payload of a data map, as maxSecretSize bounds it.
func dataSize[V string | []byte](data map[string]V) int {
	size := 0
	for _, v := range data {
		size += len(v)
	}
	return size
}

// validateImmutableData enforces `immutable: true` and the immutability
// of a Secret's type.
func validateImmutableData(imm, oldImm *bool, data, oldData any, bin, oldBin any, typ, oldTyp corev1.SecretType) field.ErrorList {
	var errs field.ErrorList
	if typ != oldTyp {
		errs = append(errs, field.Invalid(field.NewPath("type"), typ, "field is immutable"))
	}
	if oldImm != nil && *oldImm {
		if imm == nil || !*imm {
			errs = append(errs, field.Forbidden(field.NewPath("immutable"), "field is immutable when `immutable` is set"))
		}
		if !apiequality.Semantic.DeepEqual(data, oldData) || !apiequality.Semantic.DeepEqual(bin, oldBin) {
			errs = append(errs, field.Forbidden(field.NewPath("data"), "field is immutable when `immutable` is set"))
		}
	}
	return errs
}

// ServiceAccount describes core/v1 ServiceAccounts.
var ServiceAccount = &registry.Kind{
	Resource:   schema.GroupResource{Resource: "serviceaccounts"},
	Singular:   "serviceaccount",
	Version:    "v1",
	Namespaced: true,
	New:        func() runtime.Object { return &corev1.ServiceAccount{} },
	NewList:    func() runtime.Object { return &corev1.ServiceAccountList{} },
	ShortNames: []string{"sa"},
	Validate: func(_ context.Context, obj runtime.Object) field.ErrorList {
		return registry.ValidateMeta(obj, true, registry.DNS1123Domain)
	},
	Table: &registry.Table{
		Columns: []registry.Column{
			{Name: "Secrets", Type: "string", Description: "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use."},
			registry.AgeColumn,
		},
		Row: func(obj runtime.Object) []any {
			sa := obj.(*corev1.ServiceAccount)
			return []any{int64(len(sa.Secrets)), registry.CreationAge(sa)}
		},
	},
}

// Event describes core/v1 Events, which expire after an hour (the API
// server's --event-ttl sets another time).
var Event = &registry.Kind{
	Resource:   schema.GroupResource{Resource: "events"},
	Singular:   "event",
	Version:    "v1",
	Namespaced: true,
	New:        func() runtime.Object { return &corev1.Event{} },
	NewList:    func() runtime.Object { return &corev1.EventList{} },
	ShortNames: []string{"ev"},
	TTLSeconds: 3600,
	Validate: func(_ context.Context, obj runtime.Object) field.ErrorList {
		ev := obj.(*corev1.Event)
		errs := registry.ValidateMeta(ev, true, func(string, bool) []string { return nil })
		if ev.InvolvedObject.Namespace != "" && ev.InvolvedObject.Namespace != ev.Namespace {
			errs = append(errs, field.Invalid(field.NewPath("involvedObject", "namespace"), ev.InvolvedObject.Namespace, "does not match event.namespace"))
		}
		return errs
	},
	Fields: func(obj runtime.Object) fields.Set {
		ev := obj.(*corev1.Event)
		source := ev.Source.Component
		if source == "" {
			source = ev.ReportingController
		}
		return fields.Set{
			"involvedObject.kind":            ev.InvolvedObject.Kind,
			"involvedObject.namespace":       ev.InvolvedObject.Namespace,
			"involvedObject.name":            ev.InvolvedObject.Name,
			"involvedObject.uid":             string(ev.InvolvedObject.UID),
			"involvedObject.apiVersion":      ev.InvolvedObject.APIVersion,
			"involvedObject.resourceVersion": ev.InvolvedObject.ResourceVersion,
			"involvedObject.fieldPath":       ev.InvolvedObject.FieldPath,
			"reason":                         ev.Reason,
			"reportingComponent":             ev.ReportingController,
			"source":                         source,
			"type":                           ev.Type,
		}
	},
	Table: &registry.Table{
		Columns: []registry.Column{
			{Name: "Last Seen", Description: "Time when last event occurred"},
			{Name: "Type", Description: "Type of this event (Normal, Warning), new types could be added in the future."},
			{Name: "Reason", Description: "This should be a short, machine understandable string that gives the reason for the transition into the object's current status."},
			{Name: "Object", Description: "The object that this event is about."},
			{Name: "Message", Description: "A human-readable description of the status of this operation."},
		},
		Row: func(obj runtime.Object) []any {
			ev := obj.(*corev1.Event)
			last := ev.LastTimestamp
			if last.IsZero() {
				last = ev.FirstTimestamp
			}
			if last.IsZero() && ev.Series != nil {
				last.Time = ev.Series.LastObservedTime.Time
			}
			if last.IsZero() {
				last.Time = ev.EventTime.Time
			}
			object := strings.ToLower(ev.InvolvedObject.Kind) + "/" + ev.InvolvedObject.Name
			return []any{registry.Age(last), ev.Type, ev.Reason, object, strings.TrimSpace(ev.Message)}
		},
	},
}
