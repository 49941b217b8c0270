// Command devkube-node is the kubelet and kube-proxy of devkube alone, for real machines to
// download: half devkube's size (tools/devkube/README.md), built from the same module and
// versions.
//
// Call it as `devkube-node <command> [args...]`, or through a symlink named after the command
// (a machine installs it as kubelet and kube-proxy).
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	proxyapp "k8s.io/kubernetes/cmd/kube-proxy/app"
	kubeletapp "k8s.io/kubernetes/cmd/kubelet/app"
)

var commands = map[string]func() int{
	"kubelet":    func() int { return cli.Run(kubeletapp.NewKubeletCommand(context.Background())) },
	"kube-proxy": func() int { return cli.Run(proxyapp.NewProxyCommand()) },
}

func main() {
	name, args := filepath.Base(os.Args[0]), os.Args[1:]
	if strings.HasPrefix(name, "devkube") {
		if len(args) == 0 {
			usage()
			os.Exit(2)
		}
		name, args = args[0], args[1:]
	}
	run, ok := commands[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "devkube-node: unknown command %q\n", name)
		usage()
		os.Exit(2)
	}
	// cobra reads os.Args[1:]: make the process look exactly like the standalone binary.
	os.Args = append([]string{name}, args...)
	os.Exit(run())
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: devkube-node {kube-proxy|kubelet} [args...]")
}
