package apiserver

import (
	"fmt"

	apiextensionsapiserver "k8s.io/apiextensions-apiserver/pkg/apiserver"
	apiextensionsoptions "k8s.io/apiextensions-apiserver/pkg/cmd/server/options"
	generatedopenapi "k8s.io/apiextensions-apiserver/pkg/generated/openapi"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	serverstorage "k8s.io/apiserver/pkg/server/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/informers"
)

// newCRDServer is k8s.io/apiextensions-apiserver in the same process, as
// in kube-apiserver: it serves apiextensions.k8s.io (CustomResourceDefinitions)
// and every custom resource they define, behind svcnet's own server
// (which hands it the requests it has no route for) and with its
// authentication, authorization, admission and etcd.
func newCRDServer(base *genericapiserver.Config, informerFactory informers.SharedInformerFactory, storageConfig *storagebackend.Config,
	etcdOpts *genericoptions.EtcdOptions, delegate genericapiserver.DelegationTarget) (*apiextensionsapiserver.CustomResourceDefinitions, error) {
	cfg := *base
	// What belongs to the front server only.
	cfg.PostStartHooks = map[string]genericapiserver.PostStartHookConfigEntry{}
	// Its own types' OpenAPI models (for managed fields); the documents
	// at /openapi stay the front server's.
	namer := openapinamer.NewDefinitionNamer(apiextensionsapiserver.Scheme)
	cfg.OpenAPIConfig = nil
	cfg.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(generatedopenapi.GetOpenAPIDefinitions, namer)
	cfg.RESTOptionsGetter = nil
	cfg.Serializer = apiextensionsapiserver.Codecs
	resources := apiextensionsapiserver.DefaultAPIResourceConfigSource()
	cfg.MergedResourceConfig = resources
	factory := serverstorage.NewDefaultStorageFactory(*storageConfig, "application/json", apiextensionsapiserver.Codecs,
		serverstorage.NewDefaultResourceEncodingConfigForEffectiveVersion(apiextensionsapiserver.Scheme, cfg.EffectiveVersion), resources, nil)
	// Health checks: only its own (the etcd ones its options add below);
	// the front server has the base's and merges the delegate's by name.
	// Inherited ones would be added twice and register a path twice.
	cfg.HealthzChecks, cfg.LivezChecks, cfg.ReadyzChecks = nil, nil, nil
	opts := *etcdOpts
	opts.DefaultStorageMediaType = "application/json"
	if err := opts.ApplyWithStorageFactoryTo(factory, &cfg); err != nil {
		return nil, fmt.Errorf("CustomResourceDefinition storage: %w", err)
	}
	config := apiextensionsapiserver.Config{
		GenericConfig: &genericapiserver.RecommendedConfig{Config: cfg, SharedInformerFactory: informerFactory},
		ExtraConfig: apiextensionsapiserver.ExtraConfig{
			CRDRESTOptionsGetter: apiextensionsoptions.NewCRDRESTOptionsGetter(opts, cfg.ResourceTransformers, cfg.StorageObjectCountTracker),
			MasterCount:          1,
		},
	}
	return config.Complete().New(delegate)
}
