// Command devkube is the local Kubernetes control plane of corral's development environment:
// one static binary that runs etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
// kubelet, kube-proxy, kwok, kubectl, helm, etcdctl, etcdutl and etcd-s3 (an S3 client of
// etcd snapshots), all built from their upstream Go modules.
//
// Call it as `devkube <command> [args...]`, or through a symlink named after the command.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	_ "time/tzdata" // CronJob time zones in kube-controller-manager, as the upstream main does

	"github.com/spf13/cobra"
	_ "k8s.io/client-go/plugin/pkg/client/auth" // kubectl and helm auth plugins, as upstream
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
)

// commands maps a command name to its entry point. Each entry point reads os.Args itself,
// exactly as the standalone binary would.
var commands = map[string]func(){
	"etcd":                    runEtcd,
	"kube-apiserver":          runKubeAPIServer,
	"kube-controller-manager": runKubeControllerManager,
	"kube-scheduler":          runKubeScheduler,
	"kubelet":                 runKubelet,
	"kube-proxy":              runKubeProxy,
	"kubectl":                 runKubectl,
	"helm":                    runHelm,
	"kwok":                    runKwok,
	"kwok-stages":             printKwokStages,
	"etcdctl":                 runEtcdctl,
	"etcdutl":                 runEtcdutl,
	"etcd-s3":                 runS3,
}

func main() {
	name, args := filepath.Base(os.Args[0]), os.Args[1:]
	if name == "devkube" {
		if len(args) == 0 {
			usage()
			os.Exit(2)
		}
		name, args = args[0], args[1:]
	}
	run, ok := commands[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "devkube: unknown command %q\n", name)
		usage()
		os.Exit(2)
	}
	// Importing etcdctl's ctlv3 turns on cobra's prefix matching for the whole process (its
	// init). kubectl, helm and kwok must not guess commands from prefixes; the etcd tools turn
	// it back on for themselves.
	cobra.EnablePrefixMatching = false
	// cobra reads os.Args[1:], etcdmain reads args[1:] and kwok's config flags parse os.Args[1:]:
	// make the process look exactly like the standalone binary.
	os.Args = append([]string{name}, args...)
	run()
}

func usage() {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(os.Stderr, "usage: devkube {%s} [args...]\n", strings.Join(names, "|"))
}
