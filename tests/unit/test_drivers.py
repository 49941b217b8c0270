"""The cluster drivers' one vocabulary (`core.api.drivers`) and the places that read it."""

from __future__ import annotations

import pytest

from corral.apiserver.routes.clusters import SCHEMA
from corral.apiserver.services.clusterspec import driver_of
from corral.core.api import drivers
from corral.core.errors import Invalid
from corral.core.provisioning.flavours import FLAVOURS


def test_the_flavours_corral_provisions_are_the_hosted_drivers() -> None:
    assert set(FLAVOURS) == drivers.HOSTED
    assert all(FLAVOURS[d].config_field == c for c, d in drivers.CONFIGS.items() if d in FLAVOURS)


def test_hosted_drivers_are_provisioned_and_imported_and_local_are_not() -> None:
    assert drivers.HOSTED < drivers.PROVISIONED
    assert {drivers.IMPORTED, drivers.LOCAL}.isdisjoint(drivers.PROVISIONED)
    assert set(drivers.PROVISIONED) | {drivers.IMPORTED, drivers.LOCAL} == set(drivers.ALL)


@pytest.mark.parametrize("config", drivers.CONFIGS)
def test_each_configuration_makes_its_driver_or_is_refused_without_a_provider(config: str) -> None:
    driver = drivers.CONFIGS[config]
    if driver not in drivers.NOT_INSTALLED:
        assert driver_of({config: {}}) == driver
        return
    with pytest.raises(Invalid) as refused:
        driver_of({config: {}})
    assert (refused.value.field, refused.value.code) == (config, "InvalidOption")
    assert f"no provider for {driver} clusters is installed" in refused.value.message


def test_the_schema_offers_every_driver_and_marks_the_legacy_one_deprecated() -> None:
    field = SCHEMA.fields["driver"]
    assert tuple(field.options) == drivers.ALL
    assert field.deprecated_options == {drivers.LEGACY: drivers.DEPRECATED}
