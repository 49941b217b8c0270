package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"
	nodefast "sigs.k8s.io/kwok/kustomize/stage/node/fast"
	nodeheartbeat "sigs.k8s.io/kwok/kustomize/stage/node/heartbeat-with-lease"
	podfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"
	kwokconfig "sigs.k8s.io/kwok/pkg/config"
	kwokcmd "sigs.k8s.io/kwok/pkg/kwok/cmd"
	kwoklog "sigs.k8s.io/kwok/pkg/log"
	kwoksignals "sigs.k8s.io/kwok/pkg/utils/signals"
)

// runKwok mirrors sigs.k8s.io/kwok/cmd/kwok, which is a main package and cannot be imported.
func runKwok() {
	// cobra merges pflag.CommandLine into every root command, and Kubernetes' verflag package
	// registers a --version flag there at init that clashes with kwok's own. Nothing in this
	// process needs Kubernetes' global flags, so kwok starts from an empty global set.
	pflag.CommandLine = pflag.NewFlagSet(os.Args[0], pflag.ExitOnError)

	flags := pflag.NewFlagSet("global", pflag.ContinueOnError)
	flags.ParseErrorsAllowlist.UnknownFlags = true
	flags.Usage = func() {}

	ctx := kwoksignals.SetupSignalContext()
	ctx, logger := kwoklog.InitFlags(ctx, flags)
	ctx, err := kwokconfig.InitFlags(ctx, flags)
	if err != nil {
		_, _ = os.Stderr.Write([]byte(flags.FlagUsages()))
		logger.Error("Init config flags", "err", err)
		os.Exit(1)
	}
	command := kwokcmd.NewCommand(ctx)
	command.PersistentFlags().AddFlagSet(flags)
	if err := command.ExecuteContext(ctx); err != nil {
		logger.Error("Execute exit", "err", err)
		os.Exit(1)
	}
}

// printKwokStages writes the stages that keep fake nodes Ready and fake pods Running.
// kwok v0.8.0 no longer loads defaults by itself; pod-delete matters because without a
// kubelet nothing else finishes a pod's deletion.
func printKwokStages() {
	stages := []string{
		nodefast.DefaultNodeInit,
		nodeheartbeat.DefaultNodeHeartbeatWithLease,
		podfast.DefaultPodReady,
		podfast.DefaultPodComplete,
		podfast.DefaultPodDelete,
	}
	fmt.Println(strings.Join(stages, "\n---\n"))
}
