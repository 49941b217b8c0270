from __future__ import annotations

from pathlib import Path

import pytest

from corral.devenv.environment import Options


def test_a_plane_without_controllers_takes_no_nodes(tmp_path: Path) -> None:
    for nodes in ({"real_nodes": 1, "downstream_clusters": 0}, {"downstream_clusters": 1}):
        with pytest.raises(ValueError, match="nodes need the controllers"):
            Options(tmp_path, tmp_path / "devkube", tmp_path, controllers=False, **nodes)
    Options(tmp_path, tmp_path / "devkube", tmp_path, downstream_clusters=0, controllers=False)


def test_clusters_with_real_workers_need_hosted_control_planes_and_the_pod_network(
    tmp_path: Path,
) -> None:
    base = {"root": tmp_path, "devkube": tmp_path / "devkube", "crds": tmp_path, "real_nodes": 1}
    for lacking in ({"hosted_control_planes": True}, {"netbins": tmp_path}):
        with pytest.raises(ValueError, match="real workers"):
            Options(**base, real_clusters=1, **lacking)  # type: ignore[arg-type]
    Options(**base, real_clusters=1, hosted_control_planes=True, netbins=tmp_path)  # type: ignore[arg-type]


def test_there_is_at_least_one_operator(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least one operator replica"):
        Options(tmp_path, tmp_path / "devkube", tmp_path, operators=0)
    assert Options(tmp_path, tmp_path / "devkube", tmp_path, operators=3).operators == 3
