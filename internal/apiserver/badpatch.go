package apiserver

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"

	"github.com/svcnet/svcnet/internal/apis"
)

// withBadPatchAnswered answers a PATCH whose patch made the patch library
// panic with a 400 Status, where kube-apiserver aborts the stream and the
// client sees no answer. Fuzzing found such patches: strategic merge's
// $setElementOrder over a list without a merge key. The stack goes to the
// log, so that a fault of the server's own is not hidden.
func withBadPatchAnswered(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPatch {
			next.ServeHTTP(w, r)
			return
		}
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			text := fmt.Sprint(v)
			slog.Error("a patch panicked the patch library", "path", r.URL.Path, "contentType", r.Header.Get("Content-Type"), "panic", text)
			first, _, _ := strings.Cut(text, "\n")
			err := apierrors.NewBadRequest("the patch cannot be applied: " + first)
			responsewriters.ErrorNegotiated(err, apis.Codecs, schema.GroupVersion{}, w, r)
		}()
		next.ServeHTTP(w, r)
	})
}
