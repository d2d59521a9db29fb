package apiserver_test

import (
	"io"
	"net/http"
	"os"
	"testing"

	"github.com/svcnet/svcnet/test/e2e/framework"
)

// TestMain stops the API server that the tests calling
// framework.SharedAPIServer share, once they are all done. The others
// start their own (framework.StartAPIServer), each saying why.
func TestMain(m *testing.M) { os.Exit(framework.RunSharedAPIServerTests(m)) }

// roundTrip sends req through hc and returns the answer's status and
// body; a request that gets no answer fails t.
func roundTrip(t *testing.T, hc *http.Client, req *http.Request) (int, []byte) {
	t.Helper()
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}
