module corral/tools/netbins

go 1.26.0

require (
	github.com/cloudnativelabs/kube-router/v2 v2.1.0
	github.com/containernetworking/plugins v1.10.0
	github.com/flannel-io/flannel v0.28.10
)
