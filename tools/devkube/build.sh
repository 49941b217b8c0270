#!/usr/bin/env bash
# Builds devkube once per distinct input and links it at tools/devkube/bin/devkube, with
# devkube-node (kubelet and kube-proxy alone, node/main.go) beside it at bin/devkube-node.
#
# The binary is cached under $DEVKUBE_CACHE (default ~/.cache/corral/devkube) in a folder named
# after a hash of everything that goes into it, so an unchanged tree never rebuilds and a
# changed one never reuses a stale binary.
set -euo pipefail
cd "$(dirname "$0")"

K8S_VERSION=v1.36.3
K8S_MAJOR=1
K8S_MINOR=36
HELM_VERSION=v4.2.4

key=$( (cat go.mod go.sum ./*.go node/*.go build.sh; go version) | sha256sum | cut -c1-16)
cache="${DEVKUBE_CACHE:-$HOME/.cache/corral/devkube}"
out="$cache/$key/devkube"
node="$cache/$key/devkube-node"

# Checkouts of one tree (git worktrees) share the cache: one build at a time, and the others
# wait for its result rather than compile the same binaries beside it.
mkdir -p "$cache"
exec {lock}>"$cache/.lock"
flock "$lock"

if [[ ! -x $out || ! -x $node ]]; then
  export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS="-trimpath -buildvcs=false"
  # Stamp the real versions: unstamped builds report v0.0.0-master, which breaks kubectl's
  # skew checks and Helm's kubeVersion constraints.
  ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=$K8S_MAJOR -X $pkg.gitMinor=$K8S_MINOR"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  ldflags+=" -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION"
  ldflags+=" -X helm.sh/helm/v4/internal/version.metadata= -X helm.sh/helm/v4/internal/version.gitTreeState=clean"
  mkdir -p "$(dirname "$out")"
  echo "devkube: building $key (a cold build takes about 5 minutes on 2 cores)" >&2
  go build -ldflags "$ldflags" -o "$out.tmp" .
  # What machines download as their kubelet and kube-proxy: every package is devkube's, so
  # this is a link of what was just compiled (about 20 s).
  go build -ldflags "$ldflags" -o "$node.tmp" ./node
  mv "$out.tmp" "$out"
  mv "$node.tmp" "$node"
fi

mkdir -p bin
ln -sfn "$out" bin/devkube
ln -sfn "$node" bin/devkube-node
