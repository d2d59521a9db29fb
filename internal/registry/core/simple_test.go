//lint:file-ignore SA1019 svcnet serves the v1 Endpoints API, deprecated in Kubernetes 1.33 but still served there too

package core

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/apis"
	"github.com/svcnet/svcnet/internal/registry"

	. "github.com/svcnet/svcnet/internal/registry/registrytest"
)

// Helpers shared by this package's tests.

func checkRow(t *testing.T, k *registry.Kind, obj runtime.Object, wantCols []string, want []any) {
	t.Helper()
	cols, row := TableOf(t, k, obj)
	if !slices.Equal(cols, wantCols) {
		t.Errorf("columns %q, want %q", cols, wantCols)
	}
	if !slices.Equal(row, want) {
		t.Errorf("row %#v, want %#v", row, want)
	}
}

// checkFields asserts the selectable fields of obj.
func checkFields(t *testing.T, k *registry.Kind, obj runtime.Object, want map[string]string) {
	t.Helper()
	_, fs, err := k.AttrFunc(obj)
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != len(want) {
		t.Errorf("fields %v, want %v", fs, want)
	}
	for f, v := range want {
		if got, ok := fs[f]; !ok || got != v {
			t.Errorf("field %s = %q, want %q", f, got, v)
		}
		// and a field selector on it picks the object
		pred := k.Predicate(labels.Everything(), fields.OneTermEqualSelector(f, v))
		if ok, err := pred.Matches(obj); !ok || err != nil {
			t.Errorf("%s=%s does not select the object: %v", f, v, err)
		}
	}
}

func endpoints(mutate func(*corev1.Endpoints)) *corev1.Endpoints {
	return Mutated(&corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Subsets: []corev1.EndpointSubset{{
			Addresses:         []corev1.EndpointAddress{{IP: "10.1.0.5"}, {IP: "fd00::5"}},
			NotReadyAddresses: []corev1.EndpointAddress{{IP: "10.1.0.6"}},
			Ports:             []corev1.EndpointPort{{Name: "http", Port: 8080}},
		}},
	}, mutate)
}

func TestEndpointsValidate(t *testing.T) {
	const ss = "subsets[0]."
	RunCreate(t, Endpoints, endpoints, []Case[*corev1.Endpoints]{
		{"one subset", nil, nil},
		{"no subsets", func(ep *corev1.Endpoints) { ep.Subsets = nil }, nil},
		{"one unnamed port", func(ep *corev1.Endpoints) { ep.Subsets[0].Ports[0].Name = "" }, nil},
		{"two ports, one unnamed", func(ep *corev1.Endpoints) {
			ep.Subsets[0].Ports = append(ep.Subsets[0].Ports, corev1.EndpointPort{Port: 8443})
		}, []string{Req(ss + "ports[1].name")}},
		{"not an address", func(ep *corev1.Endpoints) { ep.Subsets[0].Addresses[0].IP = "web-0" }, []string{Inv(ss + "addresses[0].ip")}},
		{"loopback", func(ep *corev1.Endpoints) { ep.Subsets[0].Addresses[1].IP = "::1" }, []string{Inv(ss + "addresses[1].ip")}},
		{"unspecified", func(ep *corev1.Endpoints) { ep.Subsets[0].NotReadyAddresses[0].IP = "0.0.0.0" },
			[]string{Inv(ss + "notReadyAddresses[0].ip")}},
		{"link-local", func(ep *corev1.Endpoints) { ep.Subsets[0].Addresses[0].IP = "169.254.169.254" }, []string{Inv(ss + "addresses[0].ip")}},
		{"link-local multicast", func(ep *corev1.Endpoints) { ep.Subsets[0].Addresses[0].IP = "224.0.0.251" }, []string{Inv(ss + "addresses[0].ip")}},
		{"port zero", func(ep *corev1.Endpoints) { ep.Subsets[0].Ports[0].Port = 0 }, []string{Inv(ss + "ports[0].port")}},
		{"UDP", func(ep *corev1.Endpoints) { ep.Subsets[0].Ports[0].Protocol = corev1.ProtocolUDP }, nil},
		{"unknown protocol", func(ep *corev1.Endpoints) { ep.Subsets[0].Ports[0].Protocol = "ICMP" }, []string{Unsup(ss + "ports[0].protocol")}},
		{"bad name", func(ep *corev1.Endpoints) { ep.Name = "web_svc" }, []string{Inv("metadata.name")}},
	})
}

func TestEndpointsTable(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*corev1.Endpoints)
		want   string
	}{
		{"ready addresses only", nil, "10.1.0.5:8080,fd00::5:8080"},
		{"none", func(ep *corev1.Endpoints) { ep.Subsets = nil }, "<none>"},
		{"no ports", func(ep *corev1.Endpoints) { ep.Subsets[0].Ports = nil }, "10.1.0.5,fd00::5"},
		{"more than three", func(ep *corev1.Endpoints) {
			ep.Subsets[0].Ports = append(ep.Subsets[0].Ports, corev1.EndpointPort{Name: "https", Port: 8443})
			ep.Subsets = append(ep.Subsets, corev1.EndpointSubset{Addresses: []corev1.EndpointAddress{{IP: "10.1.0.9"}},
				Ports: []corev1.EndpointPort{{Port: 53}}})
		}, "10.1.0.5:8080,10.1.0.5:8443,fd00::5:8080 + 2 more..."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ep := endpoints(tc.mutate)
			ep.CreationTimestamp = TwoDaysAgo()
			checkRow(t, Endpoints, ep, []string{"Name", "Endpoints", "Age"}, []any{"web", tc.want, "2d"})
		})
	}
}

func secret(mutate func(*corev1.Secret)) *corev1.Secret {
	return Mutated(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "db-password", Namespace: "default"},
		Data:       map[string][]byte{"password": []byte("s3cr3t")},
	}, mutate)
}

func TestSecretPrepareForCreate(t *testing.T) {
	cases := []struct {
		name       string
		data       map[string][]byte
		stringData map[string]string
		want       map[string]string
	}{
		{"data only", map[string][]byte{"a": []byte("1")}, nil, map[string]string{"a": "1"}},
		{"string data only", nil, map[string]string{"user": "admin"}, map[string]string{"user": "admin"}},
		{"string data wins", map[string][]byte{"user": []byte("root"), "a": []byte("1")}, map[string]string{"user": "admin"},
			map[string]string{"user": "admin", "a": "1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := secret(func(s *corev1.Secret) { s.Data, s.StringData = tc.data, tc.stringData })
			CheckErrors(t, ValidateCreate(Secret, s))
			if s.StringData != nil || len(s.Data) != len(tc.want) {
				t.Errorf("data %q, string data %q", s.Data, s.StringData)
			}
			for k, v := range tc.want {
				if string(s.Data[k]) != v {
					t.Errorf("data[%s] = %q, want %q", k, s.Data[k], v)
				}
			}
			if s.Type != corev1.SecretTypeOpaque {
				t.Errorf("type %q, want Opaque", s.Type)
			}
		})
	}
}

func TestSecretValidate(t *testing.T) {
	RunCreate(t, Secret, secret, []Case[*corev1.Secret]{
		{"opaque", nil, nil},
		{"empty", func(s *corev1.Secret) { s.Data = nil }, nil},
		{"dotted key", func(s *corev1.Secret) { s.Data = map[string][]byte{".env": nil, "tls.crt": nil} }, nil},
		{"key with a slash", func(s *corev1.Secret) { s.Data["a/b"] = nil }, []string{Inv("data[a/b]")}},
		{"key from string data", func(s *corev1.Secret) { s.StringData = map[string]string{"a b": "c"} }, []string{Inv("data[a b]")}},
		{"1 MiB", func(s *corev1.Secret) { s.Data = map[string][]byte{"a": make([]byte, 1<<20)} }, nil},
		{"more than 1 MiB", func(s *corev1.Secret) {
			s.Data = map[string][]byte{"a": make([]byte, 1<<19), "b": make([]byte, 1<<19+1)}
		}, []string{"data: Too long"}},
		{"TLS", func(s *corev1.Secret) {
			s.Type = corev1.SecretTypeTLS
			s.Data = map[string][]byte{corev1.TLSCertKey: []byte("cert"), corev1.TLSPrivateKeyKey: []byte("key")}
		}, nil},
		{"TLS without key", func(s *corev1.Secret) {
			s.Type = corev1.SecretTypeTLS
			s.Data = map[string][]byte{corev1.TLSCertKey: []byte("cert")}
		}, []string{Req("data[tls.key]")}},
		{"TLS without anything", func(s *corev1.Secret) { s.Type, s.Data = corev1.SecretTypeTLS, nil },
			[]string{Req("data[tls.crt]"), Req("data[tls.key]")}},
		{"docker config", func(s *corev1.Secret) {
			s.Type = corev1.SecretTypeDockerConfigJson
			s.Data = map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)}
		}, nil},
		{"docker config without config", func(s *corev1.Secret) { s.Type = corev1.SecretTypeDockerConfigJson },
			[]string{Req("data[.dockerconfigjson]")}},
		{"custom type", func(s *corev1.Secret) { s.Type = "example.com/token" }, nil},
		{"bad name", func(s *corev1.Secret) { s.Name = "DB" }, []string{Inv("metadata.name")}},
	})
}

func TestSecretValidateUpdate(t *testing.T) {
	cases := []struct {
		name      string
		immutable bool // the stored secret is immutable
		mutate    func(*corev1.Secret)
		want      []string
	}{
		{"data", false, func(s *corev1.Secret) { s.Data["password"] = []byte("n3w") }, nil},
		{"string data", false, func(s *corev1.Secret) { s.StringData = map[string]string{"password": "n3w"} }, nil},
		{"made immutable", false, func(s *corev1.Secret) { s.Immutable = ptr.To(true) }, nil},
		{"type", false, func(s *corev1.Secret) { s.Type = "example.com/token" }, []string{Inv("type")}},
		{"labels of an immutable secret", true, func(s *corev1.Secret) { s.Labels = map[string]string{"a": "b"} }, nil},
		{"data of an immutable secret", true, func(s *corev1.Secret) { s.Data["password"] = []byte("n3w") }, []string{Forbid("data")}},
		{"same data through string data", true, func(s *corev1.Secret) { s.StringData = map[string]string{"password": "s3cr3t"} }, nil},
		{"new data through string data", true, func(s *corev1.Secret) { s.StringData = map[string]string{"user": "admin"} },
			[]string{Forbid("data")}},
		{"immutable dropped", true, func(s *corev1.Secret) { s.Immutable = nil }, []string{Forbid("immutable")}},
		{"immutable turned off", true, func(s *corev1.Secret) { s.Immutable = ptr.To(false) }, []string{Forbid("immutable")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old := secret(nil)
			if tc.immutable {
				old.Immutable = ptr.To(true)
			}
			apis.Scheme.Default(old)
			obj := old.DeepCopy()
			tc.mutate(obj)
			CheckErrors(t, ValidateUpdate(Secret, obj, old), tc.want...)
			if obj.StringData != nil {
				t.Errorf("string data kept: %q", obj.StringData)
			}
		})
	}
}

func TestSecretTableAndFields(t *testing.T) {
	s := secret(func(s *corev1.Secret) {
		s.Type = corev1.SecretTypeBasicAuth
		s.Data = map[string][]byte{"username": nil, "password": nil}
		s.CreationTimestamp = TwoDaysAgo()
	})
	checkRow(t, Secret, s, []string{"Name", "Type", "Data", "Age"}, []any{"db-password", "kubernetes.io/basic-auth", int64(2), "2d"})
	checkFields(t, Secret, s, map[string]string{"metadata.name": "db-password", "metadata.namespace": "default", "type": "kubernetes.io/basic-auth"})
}

func configMap(mutate func(*corev1.ConfigMap)) *corev1.ConfigMap {
	return Mutated(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: "default"},
		Data:       map[string]string{"app.properties": "a=1", "LOG_LEVEL": "debug"},
		BinaryData: map[string][]byte{"logo.png": {0x89, 'P', 'N', 'G'}},
	}, mutate)
}

func TestConfigMapValidate(t *testing.T) {
	half := strings.Repeat("x", 1<<19)
	RunCreate(t, ConfigMap, configMap, []Case[*corev1.ConfigMap]{
		{"data and binary data", nil, nil},
		{"empty", func(cm *corev1.ConfigMap) { cm.Data, cm.BinaryData = nil, nil }, nil},
		{"bad key", func(cm *corev1.ConfigMap) { cm.Data["a:b"] = "" }, []string{Inv("data[a:b]")}},
		{"bad binary key", func(cm *corev1.ConfigMap) { cm.BinaryData[".."] = nil }, []string{Inv("binaryData[..]")}},
		{"1 MiB in all", func(cm *corev1.ConfigMap) {
			cm.Data = map[string]string{"a": half}
			cm.BinaryData = map[string][]byte{"b": []byte(half)}
		}, nil},
		{"more than 1 MiB in all", func(cm *corev1.ConfigMap) {
			cm.Data = map[string]string{"a": half}
			cm.BinaryData = map[string][]byte{"b": []byte(half + "x")}
		}, []string{field.NewPath("").String() + ": Too long"}}, // the whole object, as in Kubernetes
		{"bad name", func(cm *corev1.ConfigMap) { cm.Name = "Settings" }, []string{Inv("metadata.name")}},
	})
}

// A key in both data and binaryData is refused once (kube-apiserver
// reports it on data[key], svcnet on binaryData[key]).
func TestConfigMapDuplicateKey(t *testing.T) {
	errs := ValidateCreate(ConfigMap, configMap(func(cm *corev1.ConfigMap) { cm.BinaryData["LOG_LEVEL"] = nil }))
	if len(errs) != 1 || errs[0].Type != field.ErrorTypeInvalid ||
		(errs[0].Field != "data[LOG_LEVEL]" && errs[0].Field != "binaryData[LOG_LEVEL]") {
		t.Errorf("errors %v", errs)
	}
}

func TestConfigMapValidateUpdate(t *testing.T) {
	cases := []struct {
		name      string
		immutable bool
		mutate    func(*corev1.ConfigMap)
		want      []string
	}{
		{"data", false, func(cm *corev1.ConfigMap) { cm.Data["LOG_LEVEL"] = "info" }, nil},
		{"binary data", false, func(cm *corev1.ConfigMap) { cm.BinaryData = nil }, nil},
		{"made immutable", false, func(cm *corev1.ConfigMap) { cm.Immutable = ptr.To(true) }, nil},
		{"labels of an immutable config map", true, func(cm *corev1.ConfigMap) { cm.Labels = map[string]string{"a": "b"} }, nil},
		{"data of an immutable config map", true, func(cm *corev1.ConfigMap) { cm.Data["LOG_LEVEL"] = "info" }, []string{Forbid("data")}},
		{"immutable dropped", true, func(cm *corev1.ConfigMap) { cm.Immutable = nil }, []string{Forbid("immutable")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old := configMap(nil)
			if tc.immutable {
				old.Immutable = ptr.To(true)
			}
			obj := old.DeepCopy()
			tc.mutate(obj)
			CheckErrors(t, ValidateUpdate(ConfigMap, obj, old), tc.want...)
		})
	}
}

func TestConfigMapTable(t *testing.T) {
	cm := configMap(nil)
	cm.CreationTimestamp = TwoDaysAgo()
	checkRow(t, ConfigMap, cm, []string{"Name", "Data", "Age"}, []any{"settings", int64(3), "2d"})
}

func TestServiceAccount(t *testing.T) {
	cases := []struct {
		name string
		want []string
	}{
		{"default", nil},
		{"builder.ci", nil},
		{"Builder", []string{Inv("metadata.name")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: tc.name, Namespace: "default"}}
			CheckErrors(t, ValidateCreate(ServiceAccount, sa), tc.want...)
		})
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "default", CreationTimestamp: TwoDaysAgo()},
		Secrets: []corev1.ObjectReference{{Name: "default-token"}}}
	checkRow(t, ServiceAccount, sa, []string{"Name", "Secrets", "Age"}, []any{"default", int64(1), "2d"})
}

func event(mutate func(*corev1.Event)) *corev1.Event {
	return Mutated(&corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0.17a5b3c2d1e0f", Namespace: "default"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web-0", UID: "uid-1", APIVersion: "v1",
			ResourceVersion: "42", FieldPath: "spec.containers{nginx}"},
		Reason: "Pulled", Message: "Successfully pulled image \"nginx\"\n", Type: corev1.EventTypeNormal,
		Source: corev1.EventSource{Component: "kubelet", Host: "node-1"},
	}, mutate)
}

func TestEventValidate(t *testing.T) {
	RunCreate(t, Event, event, []Case[*corev1.Event]{
		{"pod event", nil, nil},
		{"node event", func(ev *corev1.Event) { ev.InvolvedObject = corev1.ObjectReference{Kind: "Node", Name: "node-1"} }, nil},
		{"other namespace", func(ev *corev1.Event) { ev.InvolvedObject.Namespace = "kube-system" }, []string{Inv("involvedObject.namespace")}},
		{"no namespace", func(ev *corev1.Event) { ev.Namespace = "" }, []string{Req("metadata.namespace"), Inv("involvedObject.namespace")}},
	})
}

func TestEventFields(t *testing.T) {
	want := map[string]string{
		"metadata.name": "web-0.17a5b3c2d1e0f", "metadata.namespace": "default",
		"involvedObject.kind": "Pod", "involvedObject.namespace": "default", "involvedObject.name": "web-0",
		"involvedObject.uid": "uid-1", "involvedObject.apiVersion": "v1", "involvedObject.resourceVersion": "42",
		"involvedObject.fieldPath": "spec.containers{nginx}", "reason": "Pulled", "reportingComponent": "",
		"source": "kubelet", "type": "Normal",
	}
	checkFields(t, Event, event(nil), want)

	// events.k8s.io writers set reportingController, not source.
	ev := event(func(ev *corev1.Event) {
		ev.Source = corev1.EventSource{}
		ev.ReportingController = "scheduler"
	})
	want["source"], want["reportingComponent"] = "scheduler", "scheduler"
	checkFields(t, Event, ev, want)
}

func TestEventTable(t *testing.T) {
	twentyMinutesAgo := metav1.NewTime(time.Now().Add(-20*time.Minute - 30*time.Second))
	cases := []struct {
		name   string
		mutate func(*corev1.Event)
	}{
		{"last timestamp", func(ev *corev1.Event) {
			ev.FirstTimestamp = metav1.NewTime(time.Now().Add(-time.Hour))
			ev.LastTimestamp = twentyMinutesAgo
		}},
		{"first timestamp only", func(ev *corev1.Event) { ev.FirstTimestamp = twentyMinutesAgo }},
		{"series", func(ev *corev1.Event) {
			ev.EventTime = metav1.NewMicroTime(time.Now().Add(-time.Hour))
			ev.Series = &corev1.EventSeries{Count: 3, LastObservedTime: metav1.NewMicroTime(twentyMinutesAgo.Time)}
		}},
		{"event time only", func(ev *corev1.Event) { ev.EventTime = metav1.NewMicroTime(twentyMinutesAgo.Time) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkRow(t, Event, event(tc.mutate), []string{"Name", "Last Seen", "Type", "Reason", "Object", "Message"},
				[]any{"web-0.17a5b3c2d1e0f", "20m", "Normal", "Pulled", "pod/web-0", "Successfully pulled image \"nginx\""})
		})
	}
	// kube-apiserver's --event-ttl defaults to an hour.
	if Event.TTLSeconds != uint64(time.Hour/time.Second) {
		t.Errorf("events expire after %d s, want an hour", Event.TTLSeconds)
	}
}
