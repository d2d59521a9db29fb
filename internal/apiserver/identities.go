package apiserver

// The identities svcnet issues credentials for. The user and group names
// are Kubernetes' own where a component has one, so that the same
// credentials and rules carry over to a real cluster.
const (
	// Admin can do everything (group system:masters, like kubeadm's admin).
	AdminUser  = "kubernetes-admin"
	AdminGroup = "system:masters"
	// Viewer can read everything but Secrets.
	ViewerUser  = "svcnet-viewer"
	ViewerGroup = "svcnet:viewers"
	// ControllerManager and Scheduler run the controllers.
	ControllerManagerUser = "system:kube-controller-manager"
	SchedulerUser         = "system:kube-scheduler"
	// Proxy is the node service proxy.
	ProxyUser  = "system:kube-proxy"
	ProxyGroup = "system:node-proxier"
	// ProgrammedLeaseRole lets the proxy and the ingress keep their
	// Leases of what their data path reflects.
	ProgrammedLeaseRole = "svcnet:endpointslice-consumer"
	// DNS is the cluster DNS.
	DNSUser = "system:svcnet-dns"
	// Ingress is the ingress controller.
	IngressUser = "system:svcnet-ingress"
	// NodeGroup holds every node agent; a node's user is NodeUserPrefix+name.
	NodeGroup      = "system:nodes"
	NodeUserPrefix = "system:node:"
)
