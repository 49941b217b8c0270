"""The node files of the local catalog, as a machine will use them: the binaries run, the CNI
tarball holds the four plugins, and a real containerd imports the image archive and names every
image in it, whose programs then run from the image's own files."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from corral.core.provisioning import catalog
from corral.devenv import hosted, images, nodeassets
from corral.devenv.images import ControlPlaneImage

from ..conftest import ROOT

# Runs as `unshare --mount --net --propagation private -- sh -c SCRIPT sh <dir> <archive>
# <flannel image> <network-policies image>`: containerd, its mounts and the iptables rules
# written below live in namespaces that go with the script, and its files in <dir>.
SCRIPT = r"""
set -eu
dir=$1 archive=$2 flannel=$3 policies=$4
mount -t tmpfs tmpfs /run
socket=/run/containerd.sock
cat > "$dir/containerd.toml" <<EOF
version = 2
root = "$dir/root"
state = "/run/containerd"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$socket"
EOF
containerd --config "$dir/containerd.toml" > "$dir/containerd.log" 2>&1 &
trap 'kill $!; wait $! || true' EXIT
ready=0
for _ in $(seq 100); do
  if ctr -a "$socket" version > /dev/null 2>&1; then ready=1; break; fi
  sleep 0.1
done
[ "$ready" = 1 ] || { cat "$dir/containerd.log" >&2; exit 1; }
ctr -a "$socket" -n k8s.io images import "$archive" > /dev/null
echo "images:"
ctr -a "$socket" -n k8s.io images ls -q
mkdir "$dir/flannel" "$dir/policies"
ctr -a "$socket" -n k8s.io images mount "$flannel" "$dir/flannel" > /dev/null
ctr -a "$socket" -n k8s.io images mount "$policies" "$dir/policies" > /dev/null
echo "flanneld: $(chroot "$dir/flannel" /opt/bin/flanneld --version 2>&1)"
echo "iptables: $(chroot "$dir/flannel" /usr/sbin/iptables --version)"
# flanneld's masquerading rule, with the extensions it loads, in this private network namespace.
chroot "$dir/flannel" /usr/sbin/iptables -t nat -N FLANNEL-POSTRTG
chroot "$dir/flannel" /usr/sbin/iptables -t nat -A FLANNEL-POSTRTG -s 10.42.0.0/16 \
  ! -d 224.0.0.0/4 -m comment --comment "flanneld masq" -j MASQUERADE --random-fully
echo "rules: $(chroot "$dir/flannel" /usr/sbin/iptables-save -t nat | grep -c FLANNEL-POSTRTG)"
echo "shell: $(chroot "$dir/flannel" /bin/sh -c 'echo works')"
echo "kube-router: $(chroot "$dir/policies" /usr/local/bin/kube-router --version 2>&1)"
# What kube-router's policy controller writes: a set of pod addresses and a verdict on it.
chroot "$dir/policies" /usr/sbin/ipset create corral-pods hash:ip
chroot "$dir/policies" /usr/sbin/ipset add corral-pods 10.42.1.5
chroot "$dir/policies" /usr/sbin/iptables -A FORWARD -m set --match-set corral-pods dst \
  -j REJECT --reject-with icmp-port-unreachable
echo "sets: $(chroot "$dir/policies" /usr/sbin/ipset list -n)"
verdicts=$(chroot "$dir/policies" /usr/sbin/iptables-save -t filter | grep -c 'set corral-pods')
echo "verdicts: $verdicts"
"""


@pytest.fixture(scope="module")
def assets(devkube: Path, netbins: Path) -> nodeassets.NodeAssets:
    return nodeassets.build(devkube.with_name(nodeassets.NODE_BINARY), netbins)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_every_file_has_the_checksum_the_catalog_gives(assets: nodeassets.NodeAssets) -> None:
    files = sorted(p.name for p in assets.directory.iterdir())
    assert files == sorted([*assets.files.values(), nodeassets.SUMS])
    for name, asset in assets.node().items():
        file = asset.url.removeprefix(catalog.ASSETS_PATH)
        assert file == assets.files[name]
        assert sha256(assets.directory / file) == asset.sha256
    # kubelet and kube-proxy are one binary under two names.
    assert assets.node()["kubelet"].sha256 == assets.node()["kube-proxy"].sha256


def test_the_local_catalog_has_the_node_section_and_pod_network(
    assets: nodeassets.NodeAssets,
) -> None:
    image = ControlPlaneImage(f"{images.CONTROLPLANE_REPOSITORY}:{assets.version}-abc", Path("x"))
    text = hosted.settings(image, node_assets=assets)[catalog.SETTING]
    release = catalog.parse(text).release(assets.version)
    assert release.node == assets.node()
    assert release.component(catalog.FLANNEL) == catalog.Component(
        assets.flannel_image, (images.FLANNEL_COMMAND,)
    )
    assert release.component(catalog.NETWORK_POLICIES).image == assets.network_policies_image


@pytest.mark.parametrize("name", ["kubelet", "kube-proxy"])
def test_the_node_binary_runs_under_each_name(
    assets: nodeassets.NodeAssets, tmp_path: Path, name: str
) -> None:
    # A machine installs it under its command's name; devkube-node runs the command its name
    # says.
    installed = tmp_path / name
    installed.symlink_to(assets.directory / assets.files[name])
    printed = subprocess.run([str(installed), "--version"], capture_output=True, text=True,
                             check=True).stdout  # fmt: skip
    assert printed.split() == ["Kubernetes", assets.version]


def test_the_cni_tarball_holds_the_four_plugins_at_its_top(
    assets: nodeassets.NodeAssets, tmp_path: Path
) -> None:
    with tarfile.open(assets.directory / assets.files["cni-plugins"]) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert sorted(members) == ["bridge", "host-local", "loopback", "portmap"]
        assert all(m.isfile() and m.mode == 0o755 for m in members.values())
        tar.extractall(tmp_path, filter="data")
    # A CNI plugin called with no command prints what it is.
    about = subprocess.run([str(tmp_path / "bridge")], capture_output=True, text=True,
                           check=False, env={})  # fmt: skip
    assert "CNI bridge plugin v1.10.0" in about.stderr + about.stdout


def test_containerd_imports_every_image_and_their_programs_run(
    assets: nodeassets.NodeAssets, tmp_path: Path
) -> None:
    unshare = shutil.which("unshare")
    assert unshare, "the test needs util-linux's unshare"
    done = subprocess.run(
        [unshare, "--mount", "--net", "--propagation", "private", "--",
         "sh", "-c", SCRIPT, "sh", str(tmp_path), str(assets.directory / assets.files["images"]),
         assets.flannel_image, assets.network_policies_image],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    listed = lines[lines.index("images:") + 1 : lines.index("images:") + 4]
    assert sorted(listed) == sorted(
        [images.BUSYBOX_IMAGE, assets.flannel_image, assets.network_policies_image]
    )
    said = dict(line.split(": ", 1) for line in lines if ": " in line)
    assert said["flanneld"] == assets.flannel_image.rsplit(":", 1)[1].split("-")[0]
    assert said["iptables"].endswith("(nf_tables)")
    assert said["rules"] == "2"  # the chain and its rule
    assert said["shell"] == "works"
    assert said["kube-router"].startswith("Running /usr/local/bin/kube-router version v2.1.0")
    assert said["sets"] == "corral-pods"
    assert said["verdicts"] == "1"


def test_the_archive_names_each_image_for_containerd(assets: nodeassets.NodeAssets) -> None:
    with tarfile.open(assets.directory / assets.files["images"]) as tar:
        index = tar.extractfile("./index.json")
        assert index is not None
        manifests = json.load(index)["manifests"]
    names = [m["annotations"][nodeassets.CONTAINERD_IMAGE_NAME] for m in manifests]
    assert names == [images.BUSYBOX_IMAGE, assets.flannel_image, assets.network_policies_image]


def test_a_second_build_is_the_cached_one(assets: nodeassets.NodeAssets, devkube: Path) -> None:
    again = nodeassets.build(devkube.with_name(nodeassets.NODE_BINARY), ROOT / "tools" / "netbins")
    assert again == assets
