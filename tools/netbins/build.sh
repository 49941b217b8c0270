#!/usr/bin/env bash
# Builds the pod network's binaries once per distinct input and links their folder at
# tools/netbins/bin: flanneld, kube-router (for its NetworkPolicy controller) and the CNI plugins
# bridge, host-local, portmap and loopback (README.md says what each is for and why it is built
# this way).
#
# Cached like tools/devkube/build.sh: under $NETBINS_CACHE (default ~/.cache/corral/netbins) in
# a folder named after a hash of everything that goes into the binaries.
set -euo pipefail
cd "$(dirname "$0")"

FLANNEL=github.com/flannel-io/flannel
KUBE_ROUTER=github.com/cloudnativelabs/kube-router/v2
PLUGINS=github.com/containernetworking/plugins
CNI_PLUGINS=(plugins/main/bridge plugins/ipam/host-local plugins/meta/portmap plugins/main/loopback)

key=$( (cat go.mod go.sum build.sh; go version) | sha256sum | cut -c1-16)
cache="${NETBINS_CACHE:-$HOME/.cache/corral/netbins}"
out="$cache/$key"

# Several worktrees share the cache: one build at a time, and the others wait for its result.
mkdir -p "$cache"
exec {lock}>"$cache/.lock"
flock "$lock"

if [[ ! -d $out ]]; then
  export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS="-trimpath -buildvcs=false -mod=readonly"
  echo "netbins: building $key (cold: about 5 CPU-minutes; README.md)" >&2
  # go.sum pins each module's hash; each is built in a copy of its own module, with its own
  # go.mod and go.sum, so its dependencies are exactly the ones its release was built with.
  go mod download "$FLANNEL" "$KUBE_ROUTER" "$PLUGINS"
  work=$(mktemp -d)
  partial="$out.tmp"
  # A failed build leaves neither its copies of the modules nor half a folder in the cache.
  trap 'chmod -R u+w "$work"; rm -rf "$work" "$partial"' EXIT
  for module in "$FLANNEL" "$KUBE_ROUTER" "$PLUGINS"; do
    # kube-router's path ends in its major version (/v2): the copy is named after the module.
    name=${module%/v[0-9]*}
    cp -r "$(go list -m -f '{{.Dir}}' "$module")" "$work/${name##*/}"
  done
  chmod -R u+w "$work"
  rm -rf "$partial"
  mkdir -p "$partial/cni"

  # Two of flanneld's backends cannot be built here, so it is built without them (corral uses
  # vxlan): the Tencent Cloud VPC backend, whose SDK module the Go proxy does not serve, and the
  # udp backend, which needs cgo on amd64 (upstream's own docs keep it for debugging only).
  for backend in tencentvpc udp; do
    import="\"$FLANNEL/pkg/backend/$backend\""
    if [[ $(grep -c "$import" "$work/flannel/main.go") != 1 ]]; then
      echo "netbins: flannel's main.go no longer imports $import once; revisit build.sh" >&2
      exit 1
    fi
    sed -i "\\#$import#d" "$work/flannel/main.go"
  done
  flannel_version=$(go list -m -f '{{.Version}}' "$FLANNEL")
  (cd "$work/flannel" && go build -o "$partial/flanneld" \
    -ldflags "-s -w -X $FLANNEL/pkg/version.Version=$flannel_version" .)

  kube_router_version=$(go list -m -f '{{.Version}}' "$KUBE_ROUTER")
  (cd "$work/kube-router" && go build -o "$partial/kube-router" \
    -ldflags "-s -w -X $KUBE_ROUTER/pkg/version.Version=$kube_router_version" ./cmd/kube-router)

  plugins_version=$(go list -m -f '{{.Version}}' "$PLUGINS")
  for plugin in "${CNI_PLUGINS[@]}"; do
    (cd "$work/plugins" && go build -o "$partial/cni/${plugin##*/}" \
      -ldflags "-s -w -X $PLUGINS/pkg/utils/buildversion.BuildVersion=$plugins_version" "./$plugin")
  done
  rm -rf "$out"
  mv "$partial" "$out"
fi

ln -sfn "$out" bin
