module corral/tools/netbins

go 1.26.0

require (
	github.com/containernetworking/plugins v1.10.0
	github.com/flannel-io/flannel v0.28.10
	sigs.k8s.io/kube-network-policies v0.8.0
)
