package framework

import (
	"testing"

	"github.com/svcnet/svcnet/internal/controllermanager"
)

// StartControllerManager starts `svcnet controller-manager` against api:
// every controller, no health or metrics server, no leader election,
// then edit's changes (nil: none). Its command line is the options' own
// (controllermanager.Options.Args).
func StartControllerManager(t testing.TB, api *APIServer, edit func(*controllermanager.Options)) *Process {
	t.Helper()
	o := controllermanager.Defaults()
	o.Kubeconfig, o.BindAddress, o.LeaderElect = api.KubeconfigOf("controller-manager"), "0", false
	if edit != nil {
		edit(&o)
	}
	return StartProcess(t, append([]string{"controller-manager"}, o.Args()...)...)
}
