#!/usr/bin/env bash
# Builds the Kubernetes 1.35 control plane (kube-apiserver, kube-controller-manager,
# kube-scheduler) once per distinct input and links it at tools/devkube/bin/devkube-v1.35.
#
# Cached like ../build.sh: under $DEVKUBE_CACHE (default ~/.cache/corral/devkube) in a folder
# named after a hash of everything that goes into the binary.
set -euo pipefail
cd "$(dirname "$0")"

K8S_VERSION=v1.35.8
K8S_MAJOR=1
K8S_MINOR=35

key=$( (cat go.mod go.sum ./*.go build.sh; go version) | sha256sum | cut -c1-16)
cache="${DEVKUBE_CACHE:-$HOME/.cache/corral/devkube}"
out="$cache/$key/devkube-v1.35"

# Checkouts of one tree (git worktrees) share the cache: one build at a time, and the others
# wait for its result rather than compile the same binaries beside it.
mkdir -p "$cache"
exec {lock}>"$cache/.lock"
flock "$lock"

if [[ ! -x $out ]]; then
  export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS="-trimpath -buildvcs=false"
  # Unstamped builds report v0.0.0-master; the version change waits for /version to report
  # exactly this gitVersion.
  ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=$K8S_MAJOR -X $pkg.gitMinor=$K8S_MINOR"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  mkdir -p "$(dirname "$out")"
  echo "devkube-v1.35: building $key (cold: about 5.5 minutes on 2 cores; tools/devkube/README.md)" >&2
  go build -ldflags "$ldflags" -o "$out.tmp" .
  mv "$out.tmp" "$out"
fi

mkdir -p ../bin
ln -sfn "$out" ../bin/devkube-v1.35
