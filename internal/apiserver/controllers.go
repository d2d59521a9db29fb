package apiserver

import (
	"fmt"
	"time"

	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/svcnet/svcnet/internal/controller/clusterroleaggregation"
	"github.com/svcnet/svcnet/internal/controller/garbagecollector"
	"github.com/svcnet/svcnet/internal/controller/namespace"
	"github.com/svcnet/svcnet/internal/controller/serviceaccount"
)

// startLifecycleControllers runs the namespace controller, the garbage
// collector, the ClusterRole aggregation and the ServiceAccount and
// root-CA publishing controllers inside the API server. In Kubernetes they belong to
// kube-controller-manager; svcnet keeps them with the server so that
// namespace deletion and cascading deletion work with the API server
// alone.
func lifecycleControllers(caPEM []byte) genericapiserver.PostStartHookFunc {
	return func(hookCtx genericapiserver.PostStartHookContext) error {
		return startLifecycleControllers(hookCtx, caPEM)
	}
}

func startLifecycleControllers(hookCtx genericapiserver.PostStartHookContext, caPEM []byte) error {
	cfg := *hookCtx.LoopbackClientConfig
	cfg.QPS, cfg.Burst = 200, 400
	// Deprecation warnings (v1 Endpoints) are for users, not for us.
	cfg.WarningHandler = rest.NoWarnings{}
	client, err := kubernetes.NewForConfig(&cfg)
	if err != nil {
		return err
	}
	meta, err := metadata.NewForConfig(&cfg)
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactory(client, 10*time.Minute)
	ns := namespace.New(client, meta, factory)
	agg := clusterroleaggregation.New(client, factory)
	sa, more := serviceaccount.New(client, factory, caPEM)
	factory.Start(hookCtx.Done())
	for _, f := range more {
		f.Start(hookCtx.Done())
	}
	go ns.Run(hookCtx)
	go agg.Run(hookCtx)
	go sa.Run(hookCtx, 2)

	gc, err := garbagecollector.New(meta, client.Discovery())
	if err != nil {
		return fmt.Errorf("garbage collector: %w", err)
	}
	go gc.Run(hookCtx)
	return nil
}
