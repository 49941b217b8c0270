#!/bin/sh
# corral's node installer: joins this machine to a cluster corral provisioned, as a worker.
# Served at /v3/connect/install.sh and run by the node command a cluster registration token
# shows (docs/design/real-machines.md, sections 2 and 3):
#
#   curl -fsSL --pinnedpubkey sha256//<key> -k https://corral/v3/connect/install.sh | \
#     sh -s - --server https://corral --token <token> --ca-checksum <sha256> --worker
#
# As root, with curl, tar, sha256sum and containerd running, it checks corral's CA against
# --ca-checksum, registers the machine, downloads and checks every file the cluster's version
# needs, writes them under /var/lib/corral-node (the CNI plugins into /opt/cni/bin), imports
# the image archive and starts kubelet and kube-proxy under systemd or, without it, under a
# small supervisor loop. Every path it writes is listed in /var/lib/corral-node/installed-files
# before it is written; /usr/local/bin/corral-node-uninstall.sh removes exactly those. A
# failure before kubelet starts runs it, so nothing half-installed stays.
set -eu

NODE_DIR=/var/lib/corral-node
CNI_DIR=/opt/cni/bin
UNINSTALL=/usr/local/bin/corral-node-uninstall.sh
SUPERVISE=/usr/local/bin/corral-node-supervise
INSTALLED=$NODE_DIR/installed-files
UNITS_DIR=/etc/systemd/system

server=
token=
ca_checksum=
worker=
node_name=
address=
internal_address=
socket=/run/containerd/containerd.sock
cgroup_driver=
cgroup_root=
labels=
taints=
tmp=
cacert=
started=

say() { printf 'corral-node: %s\n' "$*" >&2; }
fail() {
	say "$*"
	exit 1
}

# A request to corral, trusting its CA once it is checked; `$1` is where the answer goes.
curl_corral() {
	out=$1
	shift
	if [ -n "$cacert" ]; then
		curl -sS --proto =https --cacert "$cacert" -o "$out" "$@"
	else
		curl -sS --proto =https -o "$out" "$@"
	fi
}

# corral's own downloads with its CA; any other https URL with the system's.
fetch() {
	case $2 in
	"$server"/*) curl_corral "$1" -f "$2" ;;
	https://*) curl -fsSL --proto =https -o "$1" "$2" ;;
	*) fail "will not download $2: not https" ;;
	esac
}

usage() {
	cat >&2 <<'EOF'
usage: install.sh --server https://corral --token <token> [--ca-checksum <sha256>] --worker
  [--node-name <name>] [--address <ip>] [--internal-address <ip>] [--label k=v]...
  [--taint k=v:Effect]... [--containerd-socket <path>] [--cgroup-driver systemd|cgroupfs]
  [--cgroup-root <cgroup>]
EOF
	exit 1
}

# The value of a flag: there must be one.
value() {
	[ "$2" -ge 2 ] || fail "$1 needs a value"
}

# Only characters that need no quoting in JSON or in a kubelet flag: what corral accepts
# anyway (labels, taints, names and paths); it checks them again.
plain() {
	case $2 in
	'' | *[!A-Za-z0-9._/:=@-]*) fail "$1 may hold only letters, digits and . _ / : = @ -, not '$2'" ;;
	esac
}

# The whole script is read before any of it runs: it arrives on standard input, which a
# command reading its own would otherwise eat.
main() {
	while [ $# -gt 0 ]; do
		case $1 in
		--server) value "$1" $# && server=$2 && shift 2 ;;
		--token) value "$1" $# && token=$2 && shift 2 ;;
		--ca-checksum) value "$1" $# && ca_checksum=$2 && shift 2 ;;
		--worker) worker=1 && shift ;;
		--etcd | --controlplane)
			fail "$1: the control plane of this cluster is hosted by corral; machines join as workers (--worker)"
			;;
		--node-name) value "$1" $# && node_name=$2 && shift 2 ;;
		--address) value "$1" $# && address=$2 && shift 2 ;;
		--internal-address) value "$1" $# && internal_address=$2 && shift 2 ;;
		--label) value "$1" $# && plain "$1" "$2" && labels="$labels $2" && shift 2 ;;
		--taint) value "$1" $# && plain "$1" "$2" && taints="$taints $2" && shift 2 ;;
		--containerd-socket) value "$1" $# && socket=$2 && shift 2 ;;
		--cgroup-driver) value "$1" $# && cgroup_driver=$2 && shift 2 ;;
		--cgroup-root) value "$1" $# && cgroup_root=$2 && shift 2 ;;
		-h | --help) usage ;;
		*) say "unknown flag $1" && usage ;;
		esac
	done

	# -- 1. checks ------------------------------------------------------------------------------

	[ -n "$server" ] || fail "--server is required"
	[ -n "$token" ] || fail "--token is required"
	[ -n "$worker" ] || fail "--worker is required: machines join as workers"
	case $server in
	https://*) ;;
	*) fail "--server must be https://…, not $server" ;;
	esac
	case $ca_checksum in
	'') ;;
	*[!0-9a-f]*) fail "--ca-checksum must be the sha256 of corral's CA (64 hex digits)" ;;
	*) [ ${#ca_checksum} -eq 64 ] || fail "--ca-checksum must be 64 hex digits" ;;
	esac
	plain --token "$token"
	[ "$(id -u)" -eq 0 ] || fail "run as root: it writes under $NODE_DIR, $CNI_DIR and /usr/local/bin"
	for tool in curl tar sha256sum; do
		command -v "$tool" >/dev/null 2>&1 || fail "$tool is needed and not installed"
	done
	plain --containerd-socket "$socket"
	[ -S "$socket" ] || fail "containerd is not running: no socket at $socket (--containerd-socket)"
	[ ! -e "$INSTALLED" ] || fail "corral's node is installed already: run $UNINSTALL first"

	[ -n "$node_name" ] || node_name=$(hostname | tr '[:upper:]' '[:lower:]')
	plain --node-name "$node_name"
	[ -z "$address" ] || plain --address "$address"
	[ -z "$internal_address" ] || plain --internal-address "$internal_address"
	if [ -z "$cgroup_driver" ]; then
		if [ "$(cat /proc/1/comm 2>/dev/null)" = systemd ]; then
			cgroup_driver=systemd
		else
			cgroup_driver=cgroupfs
		fi
	fi
	case $cgroup_driver in
	systemd | cgroupfs) ;;
	*) fail "--cgroup-driver must be systemd or cgroupfs, not $cgroup_driver" ;;
	esac
	[ -z "$cgroup_root" ] || plain --cgroup-root "$cgroup_root"

	tmp=$(mktemp -d)
	chmod 700 "$tmp"

	# Whatever fails from here on leaves the machine as it was: the uninstaller removes what the
	# list names (nothing, until step 3 writes), and the scratch directory goes.
	finish() {
		status=$?
		if [ "$status" -ne 0 ] && [ -z "$started" ] && [ -f "$tmp/uninstall.sh" ] && [ -f "$INSTALLED" ]; then
			say "installation failed: removing what it wrote"
			sh "$tmp/uninstall.sh" || say "the uninstaller failed too: see $INSTALLED"
		fi
		rm -rf "$tmp"
		exit "$status"
	}
	trap finish EXIT
	trap 'exit 1' INT TERM HUP

	# -- 2. corral's CA, registration, downloads ------------------------------------------------

	if [ -n "$ca_checksum" ]; then
		# Fetched without a CA (there is none yet) and checked against the command's checksum.
		curl -fsSk "$server/cacerts" -o "$tmp/ca.crt" || fail "could not fetch $server/cacerts"
		got=$(sha256sum "$tmp/ca.crt" | cut -d' ' -f1)
		[ "$got" = "$ca_checksum" ] ||
			fail "corral's CA at $server/cacerts has sha256 $got, not $ca_checksum: refusing to trust it"
		cacert=$tmp/ca.crt
	fi

	curl_corral "$tmp/uninstall.sh" -f "$server/v3/connect/uninstall.sh" ||
		fail "could not fetch $server/v3/connect/uninstall.sh"

	json_list() {
		# "k=v k2=v2" -> "k":"v","k2":"v2"; "k=v:E" -> {"key":"k","value":"v","effect":"E"}
		out=
		for item in $2; do
			case $1 in
			labels) entry="\"${item%%=*}\":\"${item#*=}\"" ;;
			taints)
				effect=${item##*:}
				pair=${item%:*}
				case $pair in
				*=*) entry="{\"key\":\"${pair%%=*}\",\"value\":\"${pair#*=}\",\"effect\":\"$effect\"}" ;;
				*) entry="{\"key\":\"$pair\",\"effect\":\"$effect\"}" ;;
				esac
				;;
			esac
			out="$out${out:+,}$entry"
		done
		printf '%s' "$out"
	}

	printf 'Authorization: Bearer %s\n' "$token" >"$tmp/authorization"
	printf '{"hostname":"%s","address":"%s","internalAddress":"%s","roles":["worker"],"labels":{%s},"taints":[%s],"cgroupDriver":"%s","cgroupRoot":"%s","containerdSocket":"%s"}' \
		"$node_name" "$address" "$internal_address" "$(json_list labels "$labels")" \
		"$(json_list taints "$taints")" "$cgroup_driver" "$cgroup_root" "$socket" >"$tmp/register.json"
	code=$(curl_corral "$tmp/registration" -X POST -H "@$tmp/authorization" \
		-H 'Content-Type: application/json' --data-binary "@$tmp/register.json" \
		-w '%{http_code}' "$server/v3/connect/register") ||
		fail "could not reach $server/v3/connect/register"
	if [ "$code" != 200 ]; then
		message=$(sed -n 's/.*"message": *"\([^"]*\)".*/\1/p' "$tmp/registration")
		fail "registration refused ($code): ${message:-$(head -c 200 "$tmp/registration")}"
	fi
	rm -f "$tmp/authorization"
	mkdir "$tmp/reg"
	tar -xf "$tmp/registration" -C "$tmp/reg" ||
		fail "registration answered something that is not a tar"

	mkdir "$tmp/assets"
	while read -r name sha256 url; do
		case $name in
		kubelet | kube-proxy | cni-plugins | images) ;;
		*) fail "registration names a download corral's installer does not know: $name" ;;
		esac
		say "downloading $name"
		fetch "$tmp/assets/$name" "$url" || fail "could not download $name from $url"
		got=$(sha256sum "$tmp/assets/$name" | cut -d' ' -f1)
		if [ "$got" != "$sha256" ]; then
			# The digests get a line of their own: whoever shows the installer's last lines may
			# cut a long one (corral keeps 200 characters of each), and a URL can be long.
			say "$name from $url is not the file the version catalog names"
			fail "$name has sha256 $got, not $sha256: not installed"
		fi
	done <"$tmp/reg/assets"
	for name in kubelet kube-proxy cni-plugins; do
		[ -f "$tmp/assets/$name" ] || fail "the cluster's version names no $name to download"
	done
	if [ -f "$tmp/assets/images" ]; then
		command -v ctr >/dev/null 2>&1 || fail "ctr (containerd's client) is needed to import images"
	fi

	# -- 3. files -------------------------------------------------------------------------------

	# Every path is listed before it is made: `f` a file, `t` a directory the node fills (removed
	# whole), `d` a directory made here (removed when empty), `i` an imported image, `u` a
	# systemd unit.
	mkdir -p "$NODE_DIR"
	: >"$INSTALLED"
	chmod 600 "$INSTALLED"
	record() { printf '%s %s\n' "$1" "$2" >>"$INSTALLED"; }

	# The directories above `$1` that are missing, outermost first, each listed and made.
	make_dirs() {
		missing=
		dir=$1
		while [ ! -d "$dir" ]; do
			missing="$dir $missing"
			dir=$(dirname "$dir")
		done
		for dir in $missing; do
			record d "$dir"
			mkdir "$dir"
		done
	}
	put() {
		record f "$2"
		cp "$1" "$2"
		chmod "$3" "$2"
	}

	record t "$NODE_DIR"
	printf '%s\n' "$socket" >"$NODE_DIR/containerd-socket"
	make_dirs /usr/local/bin
	put "$tmp/uninstall.sh" "$UNINSTALL" 755
	mkdir -m 700 "$NODE_DIR/bin" "$NODE_DIR/pki" "$NODE_DIR/run" "$NODE_DIR/log"
	for name in bootstrap.kubeconfig ca.crt kubelet.yaml kubelet.args kube-proxy.yaml; do
		cp "$tmp/reg/$name" "$NODE_DIR/$name"
		chmod 600 "$NODE_DIR/$name"
	done
	cp "$tmp/assets/kubelet" "$NODE_DIR/bin/kubelet"
	cp "$tmp/assets/kube-proxy" "$NODE_DIR/bin/kube-proxy"
	chmod 755 "$NODE_DIR/bin/kubelet" "$NODE_DIR/bin/kube-proxy"

	mkdir "$tmp/cni"
	tar -xzf "$tmp/assets/cni-plugins" -C "$tmp/cni" || fail "cni-plugins is not a gzip'd tar"
	make_dirs "$CNI_DIR"
	for plugin in "$tmp"/cni/*; do
		[ -f "$plugin" ] || continue
		target="$CNI_DIR/$(basename "$plugin")"
		if [ -e "$target" ]; then
			say "keeping $target, which was there before"
			continue
		fi
		put "$plugin" "$target" 755
	done

	if [ -f "$tmp/assets/images" ]; then
		say "importing images"
		ctr -n k8s.io -a "$socket" images ls -q | sort >"$tmp/images.before"
		ctr -n k8s.io -a "$socket" images import "$tmp/assets/images" >/dev/null ||
			fail "containerd refused the image archive"
		ctr -n k8s.io -a "$socket" images ls -q | sort >"$tmp/images.after"
		comm -13 "$tmp/images.before" "$tmp/images.after" | while read -r image; do
			record i "$image"
		done
	fi

	# The kubelet keeps its device plugins' socket there whatever its root directory.
	[ -e /var/lib/kubelet ] || record t /var/lib/kubelet

	# -- 4. kubelet and kube-proxy ----------------------------------------------------------------

	cat >"$NODE_DIR/bin/start-kubelet" <<-EOF
	#!/bin/sh
	# Written by corral's node installer: kubelet with the flags of this machine.
	set -eu
	set --
	while IFS= read -r arg; do set -- "\$@" "\$arg"; done <$NODE_DIR/kubelet.args
	exec $NODE_DIR/bin/kubelet --config=$NODE_DIR/kubelet.yaml \\
		--bootstrap-kubeconfig=$NODE_DIR/bootstrap.kubeconfig --kubeconfig=$NODE_DIR/kubelet.kubeconfig \\
		--cert-dir=$NODE_DIR/pki --root-dir=$NODE_DIR/kubelet "\$@"
	EOF
	cat >"$NODE_DIR/bin/start-kube-proxy" <<-EOF
	#!/bin/sh
	# Written by corral's node installer: kube-proxy, once the kubelet has its credential.
	set -eu
	while [ ! -s $NODE_DIR/pki/kubelet-client-current.pem ]; do sleep 2; done
	exec $NODE_DIR/bin/kube-proxy --config=$NODE_DIR/kube-proxy.yaml
	EOF
	chmod 755 "$NODE_DIR/bin/start-kubelet" "$NODE_DIR/bin/start-kube-proxy"

	if [ "$(cat /proc/1/comm 2>/dev/null)" = systemd ]; then
		for service in kubelet kube-proxy; do
			unit="$UNITS_DIR/corral-$service.service"
			record u "corral-$service.service"
			record f "$unit"
			cat >"$unit" <<-EOF
	[Unit]
	Description=corral node: $service
	After=network-online.target containerd.service

	[Service]
	ExecStart=$NODE_DIR/bin/start-$service
	Restart=always
	RestartSec=2

	[Install]
	WantedBy=multi-user.target
	EOF
		done
		systemctl daemon-reload
		started=1
		systemctl enable --now corral-kubelet.service corral-kube-proxy.service
	else
		record f "$SUPERVISE"
		cat >"$SUPERVISE" <<-'EOF'
	#!/bin/sh
	# Written by corral's node installer: runs a command again whenever it stops, as long as its
	# pid file names this loop. corral-node-supervise <pid file> <log> <command>...
	set -u
	pidfile=$1
	log=$2
	shift 2
	echo $$ >"$pidfile"
	# A kubelet that cannot start asks for a new certificate each time: after each quick
	# failure it waits twice as long, up to a minute.
	pause=1
	while [ "$(cat "$pidfile" 2>/dev/null)" = $$ ]; do
		began=$(date +%s)
		"$@" >>"$log" 2>&1
		if [ $(($(date +%s) - began)) -gt 60 ]; then pause=2; else pause=$((pause * 2)); fi
		[ "$pause" -le 60 ] || pause=60
		sleep "$pause"
	done
	EOF
		chmod 755 "$SUPERVISE"
		started=1
		for service in kubelet kube-proxy; do
			# Its own session: the uninstaller stops the loop and what it runs as one group.
			setsid "$SUPERVISE" "$NODE_DIR/run/$service.pid" "$NODE_DIR/log/$service.log" \
				"$NODE_DIR/bin/start-$service" </dev/null >/dev/null 2>&1 &
		done
	fi

	say "installed: this machine joins as node $node_name; $UNINSTALL removes it"
}

main "$@"
