"""What a hosted control plane is made from that administrators set: the release of a version
in the catalog and the storage class (Settings), read from the operator's cache of them at
each use so that a change applies at the next pass."""

from __future__ import annotations

from corral.core import settings
from corral.core.kube.informer import Informer
from corral.core.provisioning import catalog


def release(stored: Informer, version: str) -> catalog.Release:
    """The catalog's release of `version`; Invalid listing the versions when it has none."""
    text = settings.document(catalog.SETTING, stored.get(catalog.SETTING))
    return catalog.parse(text).release(version)


def storage_class(stored: Informer) -> str:
    return settings.document(
        settings.STORAGE_CLASS_SETTING, stored.get(settings.STORAGE_CLASS_SETTING)
    )
