"""moto 5.2.5 patch: a Query of a table's partition reads that partition, not the whole table.

moto's ``Table.query`` without an index finds its candidates with ``[i for i in self.all_items() if i.hash_key ==
hash_key]``, and ``all_items`` lists and sorts every item of the table: each Query costs O(N log N) in the table's
size, so an eval whose trials each query their source's call records slows with every run stored (10,000 source
runs: minutes of moto sorting per thousand trials), and so does ``make serve`` once a data folder holds many runs.
DynamoDB reads one partition. The patch hands that Query the partition's items (moto sorts them by range key next,
as before), so results, order, paging and filters are moto's own. Queries of an index keep moto's path: their
candidates come from every partition, and their tie order follows ``all_items``'s.

Canary: tests/integration/test_local_patches.py (a Query of one partition among many returns the same pages both
ways, and reads no other partition). Remove when moto's base-table Query reads only the queried partition.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

_applied = False
_scope = threading.local()  # the table and hash key of the Query this thread is in, if any
_moto_all_items: Any = None  # moto's own ``Table.all_items``: every other caller's path


def apply_query_patch() -> None:
    global _applied, _moto_all_items
    if _applied:
        return
    from moto.dynamodb.models.table import Table

    _moto_all_items = Table.all_items
    query = Table.query

    @functools.wraps(_moto_all_items)
    def partition_items(self: Any) -> Any:
        scope = getattr(_scope, "current", None)
        if scope is None or scope[0] is not self:
            return _moto_all_items(self)
        part = self.items.get(scope[1])  # ``get``: an unknown partition is not made (moto's items is a defaultdict)
        if part is None:
            return []
        return list(part.values()) if self.range_key_attr else [part]

    @functools.wraps(query)
    def partition_query(self: Any, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
        index_name = kwargs.get("index_name", args[6] if len(args) > 6 else None)
        if index_name or hash_key is None:
            return query(self, hash_key, *args, **kwargs)
        outer = getattr(_scope, "current", None)
        _scope.current = (self, hash_key)
        try:
            return query(self, hash_key, *args, **kwargs)
        finally:
            _scope.current = outer

    Table.all_items = partition_items  # type: ignore[method-assign]
    Table.query = partition_query  # type: ignore[method-assign]
    _applied = True
