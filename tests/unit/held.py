"""An application holding only the parts of `Deps` a unit test's routes use."""

from __future__ import annotations

import dataclasses
from typing import Any

from aiohttp import web

from corral.apiserver.deps import DEPS, Deps


def holding(app: web.Application, **parts: Any) -> web.Application:
    """`app` with a `Deps` of `parts`; any other part is None, so a route that reads one the
    test did not give fails loudly."""
    unset = {field.name: None for field in dataclasses.fields(Deps)}
    app[DEPS] = Deps(**(unset | parts))
    return app
