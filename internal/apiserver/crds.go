package apiserver

import (
	"fmt"
	"net/http"
	"strings"

	genericapiserver "k8s.io/apiserver/pkg/server"
)

// crdListPath is where kubectl looks for CustomResourceDefinitions when a
// manifest names a kind it does not know.
const crdListPath = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"

// serveNoCRDs answers kubectl's lookup of CustomResourceDefinitions with
// the truth: there are none (svcnet serves no custom resources). kubectl
// then reports "no matches for kind … ensure CRDs are installed first",
// as against any cluster, instead of failing the lookup. Nothing else of
// apiextensions.k8s.io is served or advertised.
func serveNoCRDs(s *genericapiserver.GenericAPIServer) {
	s.Handler.NonGoRestfulMux.HandleFunc(crdListPath, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || strings.Contains(r.URL.RawQuery, "watch=true") || strings.Contains(r.URL.RawQuery, "watch=1") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusMethodNotAllowed)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"svcnet serves no CustomResourceDefinitions","reason":"MethodNotAllowed","code":405}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"kind":"CustomResourceDefinitionList","apiVersion":"apiextensions.k8s.io/v1","metadata":{},"items":[]}`)
	})
}
