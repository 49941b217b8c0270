"""The e2e modules that run a real node share one pytest-xdist group (tests/e2e/conftest.py)."""

from __future__ import annotations

from tests.e2e.conftest import HERE, HOST_MODULES


def test_every_e2e_module_that_starts_a_real_node_is_in_the_host_group() -> None:
    starting = {path.stem for path in HERE.glob("test_*.py") if "real_nodes=" in path.read_text()}
    assert starting == HOST_MODULES
