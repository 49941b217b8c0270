package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
	"k8s.io/component-base/cli"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserverapp "k8s.io/kubernetes/cmd/kube-apiserver/app"
	kcmapp "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	schedulerapp "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func runEtcd() {
	etcdmain.Main(os.Args)
}

func runKubeAPIServer() {
	os.Exit(cli.Run(apiserverapp.NewAPIServerCommand()))
}

func runKubeControllerManager() {
	os.Exit(cli.Run(kcmapp.NewControllerManagerCommand()))
}

func runKubeScheduler() {
	os.Exit(cli.Run(schedulerapp.NewSchedulerCommand()))
}

func runKubectl() {
	if err := cli.RunNoErrOutput(kubectlcmd.NewDefaultKubectlCommand()); err != nil {
		kubectlutil.CheckErr(err)
	}
}
