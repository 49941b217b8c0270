package main

import (
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.etcd.io/etcd/etcdctl/v3/ctlv3"
	"go.etcd.io/etcd/etcdutl/v3/etcdutl"
	"go.etcd.io/etcd/pkg/v3/cobrautl"
)

// The etcd client tools, for snapshots of a hosted control plane's etcd (issue 14): etcdctl
// saves a snapshot from a running member, etcdutl restores it into fresh data or reads its status.

// runEtcdctl mirrors go.etcd.io/etcd/etcdctl/v3's main.
func runEtcdctl() {
	useEtcdCobraDefaults()
	ctlv3.MustStart()
}

// runEtcdutl mirrors go.etcd.io/etcd/etcdutl/v3's main (a main package, so not importable),
// with only its snapshot commands (restore, status): the rest operate on a stopped member's
// data, which nothing here does.
func runEtcdutl() {
	useEtcdCobraDefaults()
	root := &cobra.Command{
		Use:        "etcdutl",
		Short:      "An administrative command line tool for etcd3.",
		SuggestFor: []string{"etcdutl"},
	}
	root.PersistentFlags().StringVarP(&etcdutl.OutputFormat, "write-out", "w", "simple",
		"set the output format (fields, json, protobuf, simple, table)")
	root.AddCommand(etcdutl.NewSnapshotCommand())
	root.SetHelpTemplate(`{{.UsageString}}`)
	if err := root.Execute(); err != nil {
		cobrautl.ExitWithError(cobrautl.ExitError, err)
	}
}

// useEtcdCobraDefaults gives the etcd tools the process-wide settings of their own binaries:
// both upstream mains turn on cobra's prefix matching (`etcdctl mem list`), and neither sees
// Kubernetes' global flags (verflag's --version), which cobra would merge into their root.
func useEtcdCobraDefaults() {
	cobra.EnablePrefixMatching = true
	pflag.CommandLine = pflag.NewFlagSet(os.Args[0], pflag.ExitOnError)
}
