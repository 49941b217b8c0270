"""A long listing's rows in id order, with the narrowed and sorted views of them that pages
ask for, each made once and kept as long as the rows are.

A row is an object's id, the fields it knows without making the object, and what the object
is made from (`envelope.Listing`). Whoever keeps the rows while the objects they list stand
(a project's workloads, until one comes or goes) keeps these views with them: a page filtered
by one value of a known field (`namespaceId=`) or sorted by one (`sort=name`) then costs the
page, not a pass over, or a sort of, every row.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

R = TypeVar("R")
# An object of a collection: its id, its filterable fields (when the query needs them), and
# itself or what it is made from.
Row = tuple[str, Mapping[str, Any], R]
# A filter or a sort on a known field, and whether descending.
ViewKey = tuple[tuple[str, str] | None, str, bool]

# Sorted views kept per set of rows, the most recently used: each holds one reference per
# row it shows, so a project's 10,000 rows cost at most this many times 80 KB.
MAX_VIEWS = 16


def text(value: Any) -> str:
    """A field's value as filters and sorting compare it: as text, booleans spelled as JSON
    spells them."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def row_id(row: Row[Any]) -> str:
    return row[0]


class Rows(Generic[R]):
    def __init__(self, rows: Iterable[Row[R]]) -> None:
        self._rows: list[Row[R]] = sorted(rows, key=row_id)
        # Field → its values as text → the rows of that value, in id order.
        self._groups: dict[str, dict[str, list[Row[R]]]] = {}
        self._views: OrderedDict[ViewKey, list[Row[R]]] = OrderedDict()

    def __iter__(self) -> Iterator[Row[R]]:
        return iter(self._rows)

    @property
    def in_id_order(self) -> Sequence[Row[R]]:
        return self._rows

    def where(self, field: str, value: str) -> Sequence[Row[R]]:
        """The rows whose `field` (one every row knows) reads `value`, in id order. The first
        ask groups every row by that field, at once for all its values."""
        groups = self._groups.get(field)
        if groups is None:
            groups = self._groups[field] = {}
            for row in self._rows:
                groups.setdefault(text(row[1].get(field)), []).append(row)
        return groups.get(value, ())

    def view(self, where: tuple[str, str] | None, sort: str, descending: bool) -> Sequence[Row[R]]:
        """The rows `where` selects (all without), sorted by `sort` (a field every row knows,
        or `id`), descending or not; rows whose sort field is equal stay in id order, as a
        stable sort of the rows leaves them."""
        rows = self._rows if where is None else self.where(*where)
        if sort == "id" and not descending:
            return rows
        key: ViewKey = (where, sort, descending)
        found = self._views.get(key)
        if found is None:
            if sort == "id":
                found = list(reversed(rows))
            else:
                found = sorted(rows, key=lambda row: text(row[1].get(sort)), reverse=descending)
            self._views[key] = found
            while len(self._views) > MAX_VIEWS:
                self._views.popitem(last=False)
        self._views.move_to_end(key)
        return found


@dataclass(frozen=True)
class Fuller(Generic[R]):
    """Rows knowing fields read from their objects too (a workload's state, which changes with
    its object); and, by id, each row with the object its fields were read from."""

    rows: Rows[R]
    seen: dict[str, tuple[Any, Row[R]]]


def fuller(
    rows: Rows[R],
    obj_of: Callable[[R], Any],
    read: Callable[[R, Any], Mapping[str, Any]],
    previous: Fuller[R] | None,
) -> Fuller[R]:
    """`rows` knowing what `read` reads from each object too, read again only for an object
    that is not the one `previous` read it from (caches replace an object when it changes):
    made again after one of 10,000 changed, this reads one."""
    before = previous.seen if previous is not None else {}
    seen: dict[str, tuple[Any, Row[R]]] = {}
    for item_id, shown, source in rows:
        obj = obj_of(source)
        found = before.get(item_id)
        if found is None or found[0] is not obj:
            found = (obj, (item_id, {**shown, **read(source, obj)}, source))
        seen[item_id] = found
    return Fuller(Rows(row for _, row in seen.values()), seen)
