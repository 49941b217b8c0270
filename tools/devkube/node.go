package main

import (
	"context"
	"os"

	"k8s.io/component-base/cli"
	proxyapp "k8s.io/kubernetes/cmd/kube-proxy/app"
	kubeletapp "k8s.io/kubernetes/cmd/kubelet/app"
)

// The processes of a real node: the kubelet runs pods through a CRI runtime (containerd),
// kube-proxy gives them Services.

func runKubelet() {
	os.Exit(cli.Run(kubeletapp.NewKubeletCommand(context.Background())))
}

func runKubeProxy() {
	os.Exit(cli.Run(proxyapp.NewProxyCommand()))
}
