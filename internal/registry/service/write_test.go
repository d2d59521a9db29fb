package service

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"

	"github.com/svcnet/svcnet/internal/apis"
	"github.com/svcnet/svcnet/internal/etcd"
	"github.com/svcnet/svcnet/internal/pki"
)

// startEtcd runs svcnet's embedded etcd for the test and returns the
// storage configuration that reaches it.
func startEtcd(t *testing.T) storagebackend.Config {
	t.Helper()
	dir := t.TempDir()
	f, err := pki.EnsureEtcd(filepath.Join(dir, "pki"))
	if err != nil {
		t.Fatal(err)
	}
	e, err := etcd.Start(context.Background(), filepath.Join(dir, "etcd"),
		etcd.TLS{CA: f.CA, ServerCert: f.ServerCert, ServerKey: f.ServerKey, PeerCert: f.PeerCert, PeerKey: f.PeerKey})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	cfg := storagebackend.NewDefaultConfig("/registry", apis.Codecs.LegacyCodec(corev1.SchemeGroupVersion))
	cfg.Transport.ServerList = e.Endpoints
	cfg.Transport.TrustedCAFile, cfg.Transport.CertFile, cfg.Transport.KeyFile = f.CA, f.ClientCert, f.ClientKey
	return *cfg
}

var storePrefixes atomic.Int64

// services is the Services endpoint over etcd, each under a prefix of
// its own, with an in-memory allocation record and etcdFaults between
// the store and etcd.
type services struct {
	*REST
	alloc  *Allocators
	rec    *memRecord
	faults *etcdFaults
}

func newServices(t *testing.T, cfg storagebackend.Config) *services {
	t.Helper()
	cfg.Prefix = fmt.Sprintf("/registry-%d", storePrefixes.Add(1))
	opts := generic.RESTOptions{
		StorageConfig:           cfg.ForResource(schema.GroupResource{Resource: "services"}),
		Decorator:               generic.UndecoratedStorage,
		ResourcePrefix:          "services",
		DeleteCollectionWorkers: 1,
	}
	alloc, err := NewAllocators("10.96.0.0/24", "30000-30099")
	if err != nil {
		t.Fatal(err)
	}
	rec := newMemRecord()
	alloc.Record = rec
	r, _, err := NewREST(opts, alloc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Destroy)
	// Under the release on delete, as etcd is: what it sees is what
	// etcd answered.
	del := r.Store.Storage.Storage.(*releaseOnDelete)
	faults := &etcdFaults{Interface: del.Interface}
	del.Interface = faults
	return &services{REST: r, alloc: alloc, rec: rec, faults: faults}
}

func inDefault() context.Context {
	return genericapirequest.WithNamespace(context.Background(), metav1.NamespaceDefault)
}

func (s *services) create(t *testing.T, svc *corev1.Service) *corev1.Service {
	t.Helper()
	out, err := s.Create(inDefault(), svc, nil, &metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out.(*corev1.Service)
}

// stored is the stored Service name; nil when there is none.
func (s *services) stored(t *testing.T, name string) *corev1.Service {
	t.Helper()
	out, err := s.Get(inDefault(), name, &metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return out.(*corev1.Service)
}

// recorded reports whether v is in the record.
func (s *services) recorded(t *testing.T, v value) bool {
	t.Helper()
	if v.ip.IsValid() {
		_, ok := s.rec.ipOwner(v.ip.String())
		return ok
	}
	return s.rec.portsUsed(t, s.alloc)[v.port]
}

// holds reports whether svc (nil: none) holds v.
func holds(svc *corev1.Service, v value) bool {
	if svc == nil {
		return false
	}
	for _, u := range usedValues(svc) {
		if u == v {
			return true
		}
	}
	return false
}

// fault is what becomes of the next write that reaches etcdFaults.
type fault int

const (
	noFault fault = iota
	// lost: the write never reaches etcd, and the request gets etcd's
	// timeout.
	lost
	// applied: etcd applies the write, and the request gets the timeout
	// all the same.
	applied
)

func (f fault) String() string { return [...]string{"none", "lost", "applied"}[f] }

var errEtcdTimeout = errors.New("etcdserver: request timed out")

// etcdFaults sits between the Services store and etcd, and fails the
// next write as etcd's client can: once the request is sent, a timeout
// does not tell whether etcd applied it.
type etcdFaults struct {
	storage.Interface
	next fault
	// beforeDelete runs once, when the next delete reaches etcd.
	beforeDelete func()
}

func (f *etcdFaults) take() fault {
	next := f.next
	f.next = noFault
	return next
}

func (f *etcdFaults) Create(ctx context.Context, key string, obj, out runtime.Object, ttl uint64) error {
	switch f.take() {
	case lost:
		return errEtcdTimeout
	case applied:
		if err := f.Interface.Create(ctx, key, obj, out, ttl); err != nil {
			return err
		}
		return errEtcdTimeout
	}
	return f.Interface.Create(ctx, key, obj, out, ttl)
}

func (f *etcdFaults) GuaranteedUpdate(ctx context.Context, key string, dest runtime.Object, ignoreNotFound bool,
	preconditions *storage.Preconditions, tryUpdate storage.UpdateFunc, cached runtime.Object) error {
	switch f.take() {
	case lost:
		// The object is made (tryUpdate runs, the hooks' finish
		// functions with it), and its write is lost.
		return f.Interface.GuaranteedUpdate(ctx, key, dest, ignoreNotFound, preconditions,
			func(in runtime.Object, res storage.ResponseMeta) (runtime.Object, *uint64, error) {
				if _, _, err := tryUpdate(in, res); err != nil {
					return nil, nil, err
				}
				return nil, nil, errEtcdTimeout
			}, cached)
	case applied:
		if err := f.Interface.GuaranteedUpdate(ctx, key, dest, ignoreNotFound, preconditions, tryUpdate, cached); err != nil {
			return err
		}
		return errEtcdTimeout
	}
	return f.Interface.GuaranteedUpdate(ctx, key, dest, ignoreNotFound, preconditions, tryUpdate, cached)
}

func (f *etcdFaults) Delete(ctx context.Context, key string, out runtime.Object, preconditions *storage.Preconditions,
	validate storage.ValidateObjectFunc, cached runtime.Object, opts storage.DeleteOptions) error {
	if before := f.beforeDelete; before != nil {
		f.beforeDelete = nil
		before()
	}
	switch f.take() {
	case lost:
		return errEtcdTimeout
	case applied:
		if err := f.Interface.Delete(ctx, key, out, preconditions, validate, cached, opts); err != nil {
			return err
		}
		return errEtcdTimeout
	}
	return f.Interface.Delete(ctx, key, out, preconditions, validate, cached, opts)
}

// patch is an update as the API server's PATCH makes it: change applied
// to the Service as the store reads it, and applied again to the new one
// when another write came first. before runs once, between the store's
// read and its write; rv, when set, is a precondition.
type patch struct {
	change func(*corev1.Service)
	before func()
	rv     string
}

func (p *patch) Preconditions() *metav1.Preconditions {
	if p.rv == "" {
		return nil
	}
	return &metav1.Preconditions{ResourceVersion: &p.rv}
}

func (p *patch) UpdatedObject(_ context.Context, old runtime.Object) (runtime.Object, error) {
	if before := p.before; before != nil {
		p.before = nil
		before()
	}
	svc := old.(*corev1.Service).DeepCopy()
	p.change(svc)
	return svc, nil
}

func nodePortService(name, ip string, port int32) *corev1.Service {
	return svc(func(s *corev1.Service) {
		s.Name, s.Spec.Type = name, corev1.ServiceTypeNodePort
		s.Spec.ClusterIP, s.Spec.Ports[0].NodePort = ip, port
	})
}

var (
	ip11, ip15   = value{ip: netip.MustParseAddr("10.96.0.11")}, value{ip: netip.MustParseAddr("10.96.0.15")}
	port1, port2 = value{port: 30001}, value{port: 30002}
	port5        = value{port: 30005}
)

// How a write can end, as the request sees it.
type outcome int

const (
	committed      outcome = iota
	retried                // another write came first; the store tried again and committed
	refused                // refused, before or in etcd: surely not written
	unknownLost            // a timeout; etcd did not apply it
	unknownApplied         // a timeout; etcd applied it
)

func (o outcome) String() string {
	return [...]string{"committed", "retried", "refused", "unknown, lost", "unknown, applied"}[o]
}

// written: the stored Service is the request's.
func (o outcome) written() bool { return o == committed || o == retried || o == unknownApplied }

// An update frees what it gives up only once its write has committed:
// until then the stored Service holds it. What it takes it gives back
// only when the write surely did not happen; when a timeout leaves that
// unknown it keeps both (a leak the repair frees, never a value held
// twice). A write the store tries again gives back what the lost
// attempt took before the next one takes it again.
func TestUpdateFreesAfterCommit(t *testing.T) {
	cfg := startEtcd(t)
	changes := []struct {
		name         string
		change       func(*corev1.Service)
		given, taken []value
	}{
		{"node port changed", func(s *corev1.Service) { s.Spec.Ports[0].NodePort = 30002 }, []value{port1}, []value{port2}},
		{"made ClusterIP", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeClusterIP }, []value{port1}, nil},
		{"made ExternalName", func(s *corev1.Service) {
			s.Spec.Type, s.Spec.ExternalName = corev1.ServiceTypeExternalName, "example.com"
		}, []value{ip11, port1}, nil},
	}
	for _, ch := range changes {
		for _, o := range []outcome{committed, retried, refused, unknownLost, unknownApplied} {
			t.Run(ch.name+"/"+o.String(), func(t *testing.T) {
				s := newServices(t, cfg)
				web := s.create(t, nodePortService("web", "10.96.0.11", 30001))
				p := &patch{change: ch.change}
				overtake := func() {
					// Another client labels the Service meanwhile.
					if _, _, err := s.Update(inDefault(), "web", &patch{change: func(s *corev1.Service) {
						s.Labels = map[string]string{"touched": "yes"}
					}}, nil, nil, false, &metav1.UpdateOptions{}); err != nil {
						t.Errorf("the other write: %v", err)
					}
				}
				switch o {
				case retried:
					p.before = overtake
				case refused:
					// Between the store's read and its write: etcd
					// refuses the write, and the retry meets the
					// precondition.
					p.before, p.rv = overtake, web.ResourceVersion
				case unknownLost:
					s.faults.next = lost
				case unknownApplied:
					s.faults.next = applied
				}
				_, _, err := s.Update(inDefault(), "web", p, nil, nil, false, &metav1.UpdateOptions{})
				if (err == nil) != (o == committed || o == retried) {
					t.Fatalf("update: %v", err)
				}
				got := s.stored(t, "web")
				for _, v := range ch.given {
					if holds(got, v) == o.written() {
						t.Errorf("the stored Service holds %v: %v", v, !o.written())
					}
					if want := !(o == committed || o == retried); s.recorded(t, v) != want {
						t.Errorf("given up %v: recorded %v, want %v", v, !want, want)
					}
				}
				for _, v := range ch.taken {
					if holds(got, v) != o.written() {
						t.Errorf("the stored Service holds %v: %v", v, !o.written())
					}
					if want := o != refused; s.recorded(t, v) != want {
						t.Errorf("taken %v: recorded %v, want %v", v, !want, want)
					}
				}
			})
		}
	}
}

// A create gives back what it took when its write surely did not happen
// (refused by admission, or by etcd because the name is taken), through
// POST or through an update (server-side apply); a timeout keeps it.
func TestCreateGivesBackOnFailure(t *testing.T) {
	cfg := startEtcd(t)
	forbid := func(context.Context, runtime.Object) error {
		return apierrors.NewForbidden(schema.GroupResource{Resource: "services"}, "web", errors.New("no"))
	}
	for _, viaUpdate := range []bool{false, true} {
		for _, c := range []struct {
			outcome
			name      string
			admission rest.ValidateObjectFunc
			nameTaken bool
		}{
			{committed, "committed", nil, false},
			{refused, "refused by admission", forbid, false},
			{refused, "name taken", nil, true},
			{unknownLost, "", nil, false},
			{unknownApplied, "", nil, false},
		} {
			name := c.name
			if name == "" {
				name = c.String()
			}
			if viaUpdate && c.nameTaken {
				continue // an update of the taken name is no create
			}
			t.Run(fmt.Sprintf("via update %v/%s", viaUpdate, name), func(t *testing.T) {
				s := newServices(t, cfg)
				if c.nameTaken {
					s.create(t, nodePortService("web", "10.96.0.11", 30001))
				}
				switch c.outcome {
				case unknownLost:
					s.faults.next = lost
				case unknownApplied:
					s.faults.next = applied
				}
				want := nodePortService("web", "10.96.0.15", 30005)
				var err error
				if viaUpdate {
					_, _, err = s.Update(inDefault(), "web", &patch{change: func(s *corev1.Service) { *s = *want.DeepCopy() }},
						c.admission, nil, true, &metav1.UpdateOptions{})
				} else {
					_, err = s.Create(inDefault(), want, c.admission, &metav1.CreateOptions{})
				}
				if (err == nil) != (c.outcome == committed) {
					t.Fatalf("create: %v", err)
				}
				got := s.stored(t, "web")
				for _, v := range []value{ip15, port5} {
					if holds(got, v) != c.written() {
						t.Errorf("the stored Service holds %v: %v", v, !c.written())
					}
					if want := c.outcome != refused; s.recorded(t, v) != want {
						t.Errorf("%v: recorded %v, want %v", v, !want, want)
					}
				}
				if c.nameTaken && (!s.recorded(t, ip11) || !s.recorded(t, port1)) {
					t.Error("the refused create freed the existing Service's values")
				}
			})
		}
	}
}

// A delete frees the Service's values once its etcd delete has
// committed, and only then.
func TestDeleteFreesAfterCommit(t *testing.T) {
	cfg := startEtcd(t)
	for _, o := range []outcome{committed, refused, unknownLost, unknownApplied} {
		t.Run(o.String(), func(t *testing.T) {
			s := newServices(t, cfg)
			web := s.create(t, nodePortService("web", "10.96.0.11", 30001))
			opts := &metav1.DeleteOptions{}
			switch o {
			case refused:
				uid := types.UID("another")
				opts.Preconditions = &metav1.Preconditions{UID: &uid}
			case unknownLost:
				s.faults.next = lost
			case unknownApplied:
				s.faults.next = applied
			}
			_, _, err := s.Delete(inDefault(), "web", rest.ValidateAllObjectFunc, opts)
			if (err == nil) != (o == committed) {
				t.Fatalf("delete: %v", err)
			}
			if gone := s.stored(t, "web") == nil; gone != o.written() {
				t.Errorf("the Service is gone: %v", gone)
			}
			for _, v := range usedValues(web) {
				if want := o != committed; s.recorded(t, v) != want {
					t.Errorf("%v: recorded %v, want %v", v, !want, want)
				}
			}
		})
	}
}

// Two requests that each remove the last finalizer of a Service being
// deleted both see it deleted, but only the one whose etcd delete
// committed frees its values: by the time the other's finds it gone, a
// new Service may hold them.
func TestDeleteFoundGoneFreesNothing(t *testing.T) {
	s := newServices(t, startEtcd(t))
	web := nodePortService("web", "10.96.0.11", 30001)
	web.Finalizers = []string{"example.com/hold"}
	s.create(t, web)
	if _, _, err := s.Delete(inDefault(), "web", rest.ValidateAllObjectFunc, &metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if s.stored(t, "web") == nil || !s.recorded(t, port1) {
		t.Fatal("the Service with a finalizer is gone at once, or its values are freed")
	}
	dropFinalizers := &patch{change: func(s *corev1.Service) { s.Finalizers = nil }}
	s.faults.beforeDelete = func() {
		// The other request: its delete commits and frees the values,
		// which a new Service takes.
		if _, _, err := s.Update(inDefault(), "web", &patch{change: func(s *corev1.Service) { s.Finalizers = nil }},
			nil, nil, false, &metav1.UpdateOptions{}); err != nil {
			t.Errorf("the other request: %v", err)
		}
		if s.recorded(t, port1) {
			t.Error("the committed delete did not free the node port")
		}
		s.create(t, nodePortService("next", "10.96.0.11", 30001))
	}
	if _, _, err := s.Update(inDefault(), "web", dropFinalizers, nil, nil, false, &metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if !s.recorded(t, port1) || !s.recorded(t, ip11) {
		t.Error("the delete that found the Service gone freed the values of the Service that took them since")
	}
	if s.stored(t, "web") != nil || s.stored(t, "next") == nil {
		t.Error("web is not gone, or next is")
	}
}
