package apiserver

import (
	apiextensionsinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions"
	openapicontroller "k8s.io/apiextensions-apiserver/pkg/controller/openapi"
	openapiv3controller "k8s.io/apiextensions-apiserver/pkg/controller/openapiv3"
	genericapiserver "k8s.io/apiserver/pkg/server"
)

// crdOpenAPI publishes the schemas of CustomResourceDefinitions in the
// front server's /openapi/v2 and /openapi/v3 documents, as kube-apiserver
// does, so that `kubectl explain` and kubectl's field validation know
// custom resources. The CRD server behind it has no OpenAPI documents of
// its own; apiextensions' controllers write into the front server's.
// The services exist once PrepareRun ran, before post-start hooks.
func crdOpenAPI(s *genericapiserver.GenericAPIServer, f apiextensionsinformers.SharedInformerFactory) genericapiserver.PostStartHookFunc {
	return func(ctx genericapiserver.PostStartHookContext) error {
		crds := f.Apiextensions().V1().CustomResourceDefinitions()
		if s.StaticOpenAPISpec != nil && s.OpenAPIVersionedService != nil {
			go openapicontroller.NewController(crds).Run(s.StaticOpenAPISpec, s.OpenAPIVersionedService, ctx.Done())
		}
		if s.OpenAPIV3VersionedService != nil {
			go openapiv3controller.NewController(crds).Run(s.OpenAPIV3VersionedService, ctx.Done())
		}
		return nil
	}
}
