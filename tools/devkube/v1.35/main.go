// Command devkube (v1.35 edition) holds the three control-plane processes of Kubernetes 1.35:
// kube-apiserver, kube-controller-manager and kube-scheduler. corral's development environment
// builds a second hosted control-plane image from it, so that a provisioned cluster's
// kubernetesVersion can be moved from 1.35 to 1.36. etcd, kwok and the tools stay in the main
// devkube at 1.36 (kwok links only with 1.36).
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

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	apiserverapp "k8s.io/kubernetes/cmd/kube-apiserver/app"
	kcmapp "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	schedulerapp "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

var commands = map[string]func() int{
	"kube-apiserver":          func() int { return cli.Run(apiserverapp.NewAPIServerCommand()) },
	"kube-controller-manager": func() int { return cli.Run(kcmapp.NewControllerManagerCommand()) },
	"kube-scheduler":          func() int { return cli.Run(schedulerapp.NewSchedulerCommand()) },
}

func main() {
	name, args := filepath.Base(os.Args[0]), os.Args[1:]
	// Called as itself (devkube, or bin/devkube-v1.35 next to the main devkube), the command
	// is the first argument.
	if strings.HasPrefix(name, "devkube") {
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
	// cobra reads os.Args[1:]: make the process look exactly like the standalone binary.
	os.Args = append([]string{name}, args...)
	os.Exit(run())
}

func usage() {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(os.Stderr, "usage: devkube {%s} [args...]\n", strings.Join(names, "|"))
}
