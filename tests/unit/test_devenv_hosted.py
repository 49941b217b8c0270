"""The pure parts of the local environment for hosted control planes."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from corral.core import settings
from corral.core.provisioning import catalog
from corral.devenv import hosted, images, nodeassets
from corral.devenv.environment import Options
from corral.devenv.host import HostChanges

IMAGE = images.ControlPlaneImage(
    "localhost/corral-controlplane:v1.36.3-0123456789ab", Path("/cache/image.tar")
)


def test_a_folder_that_existed_loses_only_what_appeared_in_it(tmp_path: Path) -> None:
    folder = tmp_path / "hostpath_pv"
    (folder / "someone-elses").mkdir(parents=True)
    changes = HostChanges()
    changes.filled_by_us(folder)
    (folder / "a-volume" / "data").mkdir(parents=True)
    (folder / "a-volume" / "data" / "file").write_text("written by a pod")
    (folder / "a-file").write_text("")
    changes.undo()
    assert sorted(p.name for p in folder.iterdir()) == ["someone-elses"]


def test_a_folder_that_did_not_exist_goes_with_everything_in_it(tmp_path: Path) -> None:
    folder = tmp_path / "hostpath_pv"
    changes = HostChanges()
    changes.filled_by_us(folder)
    (folder / "a-volume").mkdir(parents=True)
    (folder / "a-volume" / "file").write_text("written by a pod")
    changes.undo()
    assert list(tmp_path.iterdir()) == []
    changes.undo()  # twice is harmless, as for every recorded change


def test_a_made_directory_goes_with_what_appeared_below_it_but_not_with_its_parents_others(
    tmp_path: Path,
) -> None:
    # Two environments nest their cgroups below the same new parent: the first to stop must
    # leave the other's alone (it is still running) and the parent with it.
    ours, theirs = tmp_path / "process" / "corral-node-a", tmp_path / "process" / "corral-cloud"
    changes = HostChanges()
    changes.mkdir(ours)
    (ours / "kubepods" / "burstable").mkdir(parents=True)
    theirs.mkdir()
    changes.undo()
    assert not ours.exists()
    assert theirs.is_dir()
    alone = tmp_path / "alone" / "corral-node-a"
    changes.mkdir(alone)
    (alone / "kubepods").mkdir()
    changes.undo()
    assert not (tmp_path / "alone").exists()


def test_the_settings_name_the_image_for_every_component_and_the_storage_class() -> None:
    values = hosted.settings(IMAGE)
    for name, value in values.items():
        settings.check(name, value)
    release = catalog.parse(values[catalog.SETTING]).release("v1.36.3")
    assert set(release.components) == {*catalog.REQUIRED, *catalog.OPTIONAL}
    assert {c.image for c in release.components.values()} == {IMAGE.reference}
    assert release.component(catalog.KWOK).command == (images.KWOK_COMMAND,)
    assert release.component(catalog.APISERVER).command == ("/usr/local/bin/kube-apiserver",)
    assert values[settings.STORAGE_CLASS_SETTING] == hosted.STORAGE_CLASS
    assert len(values[catalog.SETTING]) <= settings.MAX_VALUE


def test_the_previous_minors_image_adds_its_version_with_etcd_and_kwok_of_the_main_one() -> None:
    previous = images.ControlPlaneImage(
        "localhost/corral-controlplane:v1.35.8-ba9876543210", Path("/cache/previous.tar")
    )
    values = hosted.settings(IMAGE, previous)
    settings.check(catalog.SETTING, values[catalog.SETTING])
    versions = catalog.parse(values[catalog.SETTING])
    assert sorted(versions.releases) == ["v1.35.8", "v1.36.3"]
    old = versions.release("v1.35.8")
    assert {name: c.image for name, c in old.components.items()} == {
        **dict.fromkeys((*catalog.REQUIRED, *catalog.OPTIONAL), IMAGE.reference),
        **dict.fromkeys(images.PREVIOUS_COMMANDS, previous.reference),
    }
    assert versions.release("v1.36.3") == catalog.parse(
        hosted.settings(IMAGE)[catalog.SETTING]
    ).release("v1.36.3")
    assert len(values[catalog.SETTING]) <= settings.MAX_VALUE


NODE_ASSETS = nodeassets.NodeAssets(
    Path("/cache/node-assets/0123"),
    "v1.36.3",
    {"kubelet": "kubelet-v1.36.3", "kube-proxy": "kube-proxy-v1.36.3",
     "cni-plugins": "cni-plugins-v1.10.0.tgz", "images": "images-v1.36.3.tar"},
    {"kubelet-v1.36.3": "a" * 64, "kube-proxy-v1.36.3": "a" * 64,
     "cni-plugins-v1.10.0.tgz": "b" * 64, "images-v1.36.3.tar": "c" * 64},
    "localhost/corral-flannel:v0.28.10-0123456789ab",
    "localhost/corral-kube-router:v2.1.0-0123456789ab",
)  # fmt: skip


def test_node_files_go_to_the_version_of_their_kubelet_alone() -> None:
    previous = images.ControlPlaneImage(
        "localhost/corral-controlplane:v1.35.8-ba9876543210", Path("/cache/previous.tar")
    )
    values = hosted.settings(IMAGE, previous, NODE_ASSETS)
    settings.check(catalog.SETTING, values[catalog.SETTING])
    parsed = catalog.parse(values[catalog.SETTING])
    release = parsed.release("v1.36.3")
    assert release.node == {
        "kubelet": catalog.Asset("/assets/kubelet-v1.36.3", "a" * 64),
        "kube-proxy": catalog.Asset("/assets/kube-proxy-v1.36.3", "a" * 64),
        "cni-plugins": catalog.Asset("/assets/cni-plugins-v1.10.0.tgz", "b" * 64),
        "images": catalog.Asset("/assets/images-v1.36.3.tar", "c" * 64),
    }
    assert release.component(catalog.FLANNEL) == catalog.Component(
        NODE_ASSETS.flannel_image, ("/opt/bin/flanneld",)
    )
    assert release.component(catalog.NETWORK_POLICIES) == catalog.Component(
        NODE_ASSETS.network_policies_image, ("/usr/local/bin/kube-router",)
    )
    # A 1.36 kubelet must not join a 1.35 apiserver: that version stays simulated.
    old = parsed.release("v1.35.8")
    assert old.node is None and catalog.FLANNEL not in old.components


def test_node_files_of_another_version_are_refused() -> None:
    other = images.ControlPlaneImage("localhost/corral-controlplane:v1.37.0-0", Path("/x"))
    with pytest.raises(ValueError, match=r"node files of v1\.36\.3 for a v1\.37\.0 catalog"):
        hosted.settings(other, node_assets=NODE_ASSETS)


def test_an_environment_serves_links_of_its_own_to_the_cached_node_files(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    for name in [*NODE_ASSETS.files.values(), nodeassets.SUMS]:
        (cache / name).write_text(f"cached {name}")
    cached = dataclasses.replace(NODE_ASSETS, directory=cache)
    folder = tmp_path / "env" / "node-assets"
    served = nodeassets.served_from(cached, folder)
    assert served == dataclasses.replace(cached, directory=folder)
    assert sorted(p.name for p in folder.iterdir()) == sorted(p.name for p in cache.iterdir())
    for name in [*NODE_ASSETS.files.values(), nodeassets.SUMS]:
        assert (folder / name).samefile(cache / name)
    # Replacing what the environment serves leaves the cache's file as it was.
    kube_proxy = NODE_ASSETS.files[catalog.KUBE_PROXY]
    other = tmp_path / "other"
    other.write_text("other bytes")
    other.replace(folder / kube_proxy)
    assert (cache / kube_proxy).read_text() == f"cached {kube_proxy}"
    # The next start serves the cache's files again, whatever the folder held.
    (folder / "stale").write_text("left by a test")
    nodeassets.served_from(cached, folder)
    assert (folder / kube_proxy).samefile(cache / kube_proxy)
    assert not (folder / "stale").exists()


def test_netbins_go_mod_gives_the_versions_the_files_are_named_after() -> None:
    go_mod = Path(__file__).parents[2] / "tools" / "netbins" / "go.mod"
    assert nodeassets.module_versions(go_mod) == {
        nodeassets.CNI_MODULE: "v1.10.0",
        nodeassets.FLANNEL_MODULE: "v0.28.10",
        nodeassets.NETWORK_POLICIES_MODULE: "v2.1.0",
    }


def test_every_command_of_the_catalog_is_a_link_in_the_image() -> None:
    assert {*catalog.REQUIRED, *catalog.OPTIONAL} == set(images.CONTROLPLANE_COMMANDS)
    # The slim image has the three the 1.35 build holds (tools/devkube/v1.35/main.go).
    main_go = Path(__file__).parents[2] / "tools" / "devkube" / "v1.35" / "main.go"
    for command in images.PREVIOUS_COMMANDS:
        assert f'"{command}":' in main_go.read_text()


def test_the_image_reference_gives_the_repository_and_the_version() -> None:
    assert IMAGE.repository == "localhost/corral-controlplane"
    assert IMAGE.version == "v1.36.3"


def fake_devkube(path: Path, version: str) -> Path:
    path.write_text(f'#!/bin/sh\necho "Kubernetes {version}"\n')
    path.chmod(0o755)
    return path


def test_the_tag_is_the_version_and_the_binarys_hash(tmp_path: Path) -> None:
    one = images.controlplane_tag(fake_devkube(tmp_path / "one", "v1.36.3"))
    other = images.controlplane_tag(fake_devkube(tmp_path / "other", "v1.35.4"))
    assert one.startswith("v1.36.3-") and len(one) == len("v1.36.3-") + 12
    assert other.startswith("v1.35.4-") and one[-12:] != other[-12:]


def test_an_unchanged_devkube_is_never_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CORRAL_CONTROLPLANE_IMAGE_CACHE", str(tmp_path / "cache"))
    devkube = fake_devkube(tmp_path / "devkube", "v1.36.3")
    tag = images.controlplane_tag(devkube)
    cached = tmp_path / "cache" / f"corral-controlplane-{tag}.oci.tar"
    cached.parent.mkdir()
    cached.write_bytes(b"built before")
    monkeypatch.setenv("PATH", "")  # umoci, tar and busybox are out of reach: no build
    found = images.build_controlplane(devkube)
    assert found == (f"localhost/corral-controlplane:{tag}", cached)
    assert cached.read_bytes() == b"built before"


def test_hosted_control_planes_need_a_real_node(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="real node"):
        Options(tmp_path, tmp_path / "devkube", tmp_path, hosted_control_planes=True)
    Options(tmp_path, tmp_path / "devkube", tmp_path, real_nodes=1, hosted_control_planes=True)
