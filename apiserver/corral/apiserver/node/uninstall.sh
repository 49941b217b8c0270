#!/bin/sh
# corral's node uninstaller, written by the installer to /usr/local/bin/corral-node-uninstall.sh
# (docs/design/real-machines.md, section 3): stops kubelet and kube-proxy, removes the pods'
# containers, and deletes every path the installer listed in /var/lib/corral-node/
# installed-files, last first, and nothing else. The installer runs it itself when it fails.
set -u

NODE_DIR=/var/lib/corral-node
INSTALLED=$NODE_DIR/installed-files

say() { printf 'corral-node-uninstall: %s\n' "$*" >&2; }

main() {
	[ "$(id -u)" -eq 0 ] || {
		say "run as root"
		exit 1
	}
	if [ ! -f "$INSTALLED" ]; then
		say "nothing to remove: $INSTALLED is not there"
		exit 0
	fi
	# Last first: a directory after what was made inside it.
	listed=$(sed -n '1!G;h;$p' "$INSTALLED")
	socket=$(cat "$NODE_DIR/containerd-socket" 2>/dev/null || echo /run/containerd/containerd.sock)

	stop_services
	remove_containers "$socket"
	unmount_below "$NODE_DIR"
	remove_pod_cgroups

	printf '%s\n' "$listed" | while read -r kind path; do
		case $kind in
		f) rm -f "$path" ;;
		d) rmdir "$path" 2>/dev/null || say "kept $path: it holds files corral did not put there" ;;
		t) rm -rf "$path" ;;
		i) ctr -n k8s.io -a "$socket" images rm "$path" >/dev/null 2>&1 || true ;;
		u) systemctl daemon-reload 2>/dev/null || true ;;
		esac
	done
	say "removed"
}

stop_services() {
	sed -n 's/^u //p' "$INSTALLED" | while read -r unit; do
		systemctl disable --now "$unit" >/dev/null 2>&1 || true
	done
	groups=
	for pidfile in "$NODE_DIR"/run/*.pid; do
		[ -f "$pidfile" ] || continue
		pid=$(cat "$pidfile")
		rm -f "$pidfile"
		case $pid in
		'' | *[!0-9]*) continue ;;
		esac
		# The supervisor leads its own process group: it and what it runs stop together.
		# (dash's kill takes no `--`: the group is the negative number itself.)
		kill -TERM "-$pid" 2>/dev/null && groups="$groups $pid"
	done
	# Until they are gone: their files are about to be.
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		left=
		for pid in $groups; do
			kill -0 "-$pid" 2>/dev/null && left="$left $pid"
		done
		groups=$left
		[ -n "$groups" ] || return 0
		sleep 1
	done
	for pid in $groups; do
		kill -KILL "-$pid" 2>/dev/null || true
	done
}

# The containers the kubelet made: containerd's `k8s.io` namespace is the CRI's.
remove_containers() {
	command -v ctr >/dev/null 2>&1 && [ -S "$1" ] || return 0
	for task in $(ctr -n k8s.io -a "$1" tasks ls -q 2>/dev/null); do
		ctr -n k8s.io -a "$1" tasks kill -s SIGKILL "$task" >/dev/null 2>&1 || true
		ctr -n k8s.io -a "$1" tasks delete -f "$task" >/dev/null 2>&1 || true
	done
	for container in $(ctr -n k8s.io -a "$1" containers ls -q 2>/dev/null); do
		ctr -n k8s.io -a "$1" containers delete "$container" >/dev/null 2>&1 || true
	done
}

# The cgroups the kubelet made for pods below its cgroup root, deepest first, in every
# hierarchy (cgroup v1 and v2, either driver's names); one still holding a process stays.
remove_pod_cgroups() {
	root=$(sed -n 's/^cgroupRoot: *//p' "$NODE_DIR/kubelet.yaml" 2>/dev/null)
	for hierarchy in /sys/fs/cgroup /sys/fs/cgroup/*; do
		for top in "$hierarchy${root%/}/kubepods" "$hierarchy${root%/}/kubepods.slice"; do
			[ -d "$top" ] || continue
			find "$top" -depth -type d -exec rmdir {} + 2>/dev/null || say "kept $top: processes are left in it"
		done
	done
}

# The pods' volumes the kubelet mounted below its root directory, innermost first.
unmount_below() {
	awk -v dir="$1/" 'index($2, dir) == 1 { print $2 }' /proc/mounts | sort -r |
		while read -r mount; do
			umount "$mount" 2>/dev/null || umount -l "$mount" 2>/dev/null || say "could not unmount $mount"
		done
}

main "$@"
