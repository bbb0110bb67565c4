"""DynamoDB capacity units from **true item sizes** (issue 38, item 1): DynamoDB's size rules applied to the items as
stored, independent of the request and response bodies the exact meter (``bench.common``) prices.

Sizes (DynamoDB's developer guide, "Item sizes and formats"): each attribute costs its name's UTF-8 bytes and its
value's: a string its UTF-8 bytes, a binary its raw bytes, a number one byte per two significant digits plus one, a
boolean or null one byte, a map or list 3 bytes plus one per element and its elements (a map's names counted), a set
its elements.

Units (``TrueUnits``): a write is billed on the larger of the item before and after it (read through a client nothing
watches, around each request), 1 WRU per KB, 2 in a transaction (a ``ConditionCheck`` on its item's size); a write
whose condition failed on the item as it was (at least 1). A write that puts, changes or removes an item a global
secondary index holds (its index keys present before or after) also writes the index: 1 WRU per KB of the index's
projection of the item, 2 writes when the item's index keys change; an index write is a standard write in a
transaction too (the index is brought up to date after it commits). Counted apart (``gsi``): the exact meter prices
the requests, which do not show them. A read is billed on the **whole** stored item whatever the
projection (a projected item is read again by key to size it): per 4 KB of each item of a GetItem, BatchGetItem or
TransactGetItems, and of a Query's or Scan's items together (rounded up once), half when eventually consistent,
double in a transaction, at least one unit. Not seen: the items a Query's filter dropped (nothing here filters a
metered Query of more than a page).
"""

from __future__ import annotations

import base64
import json
import math
import threading
from collections import Counter
from typing import Any

WRITES = {
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:TransactWriteItems",
    "dynamodb:BatchWriteItem",
}


def value_size(value: dict[str, Any]) -> int:
    """DynamoDB's stored size of one attribute value in its wire form (names of map members counted)."""
    kind, v = next(iter(value.items()))
    if kind == "S":
        return len(v.encode("utf-8"))
    if kind == "N":
        digits = v.lstrip("-").replace(".", "").strip("0") or "0"
        return (len(digits) + 1) // 2 + 1
    if kind == "B":
        return len(base64.b64decode(v)) if isinstance(v, str) else len(v)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "M":
        return 3 + sum(len(k.encode("utf-8")) + value_size(x) + 1 for k, x in v.items())
    if kind == "L":
        return 3 + sum(value_size(x) + 1 for x in v)
    if kind == "BS":
        return sum(len(base64.b64decode(x)) if isinstance(x, str) else len(x) for x in v)
    if kind == "NS":
        return sum(value_size({"N": x}) for x in v)
    return sum(len(x.encode("utf-8")) for x in v)  # SS


def item_size(item: dict[str, Any]) -> int:
    """An item's size as DynamoDB stores and meters it: each attribute's name and value."""
    return sum(len(name.encode("utf-8")) + value_size(value) for name, value in item.items())


def item_kb(item: dict[str, Any] | list[dict[str, Any]] | None, unit: int = 1024) -> int:
    """Request units of one item (or of a Query's items together): their true size in ``unit`` bytes, rounded up,
    at least 1."""
    items = item if isinstance(item, list) else [item or {}]
    return max(1, math.ceil(sum(item_size(i) for i in items) / unit))


def _kind(table: str, key: dict[str, Any]) -> str:
    """A written item's kind, from its table and key (no id in it): ``runs:RUN#STATE``, ``host:SLOTS``,
    ``events:page``, ``runs:tombstone``."""
    short = table.rsplit("-", 1)[-1]
    values = [str(next(iter(v.values()))) for v in key.values()]
    if short == "events":
        return "events:page"
    if short == "runs":
        pk, sk = (values + ["", ""])[:2]
        if pk.startswith("ERASED#"):
            return "runs:tombstone"
        return f"runs:{sk.split('#')[0] + '#' + sk.split('#')[1] if sk.startswith('RUN#') else sk.split('#')[0]}"
    return f"{short}:{values[0].split('#')[0] if values else ''}"


class TrueUnits:
    """Write and read units of every DynamoDB request through the clients it watches, from true item sizes, per the
    exact meter's origin (``meter.current()``). Stored items are read through ``raw``, a client nothing watches."""

    def __init__(self, raw: Any, meter: Any) -> None:
        self.raw, self.meter = raw, meter
        self.units: dict[str, Counter[str]] = {}
        self.enabled = False  # its reads around each request take time: off while anything is timed
        self._schemas: dict[str, list[str]] = {}
        self._indexes: dict[str, list[tuple[list[str], str, list[str]]]] = {}  # table -> (keys, projection, attrs)
        self._local = threading.local()
        self._lock = threading.Lock()

    def watch(self, client: Any) -> None:
        client.meta.events.register("before-send.dynamodb.*", self._before)
        client.meta.events.register("response-received.dynamodb.*", self._after)

    # -- stored items ------------------------------------------------------------------------------------------

    def _stored(self, table: str, key: dict[str, Any]) -> int:
        return item_size(self._stored_item(table, key))

    def _stored_item(self, table: str, key: dict[str, Any]) -> dict[str, Any]:
        return dict(self.raw.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item") or {})

    def _gsis(self, table: str) -> list[tuple[list[str], str, list[str]]]:
        """The table's global secondary indexes: their key attributes, projection type and included attributes."""
        if table not in self._indexes:
            described = self.raw.describe_table(TableName=table)["Table"]
            self._indexes[table] = [
                (
                    [k["AttributeName"] for k in ix["KeySchema"]],
                    ix["Projection"]["ProjectionType"],
                    list(ix["Projection"].get("NonKeyAttributes") or []),
                )
                for ix in described.get("GlobalSecondaryIndexes") or []
            ]
        return self._indexes[table]

    def _index_units(self, table: str, before: dict[str, Any], after: dict[str, Any]) -> int:
        """The index writes one write of an item causes: per index holding it before or after, its projection's KB
        (a put, a change of a projected attribute, a delete), twice when its index keys changed."""
        units = 0
        for keys, projection, attrs in self._gsis(table):
            old, new = (self._held(table, x, keys, projection, attrs) for x in (before, after))
            if old == new:
                continue
            kb = [max(1, math.ceil(item_size(x) / 1024)) for x in (old, new) if x is not None]
            moved = old is not None and new is not None and any(old[k] != new[k] for k in keys)
            units += sum(kb) if moved or len(kb) == 1 else max(kb)
        return units

    def _held(
        self, table: str, item: dict[str, Any], keys: list[str], projection: str, attrs: list[str]
    ) -> dict[str, Any] | None:
        """What an index with these keys and projection holds of ``item`` (None: not in it, a key missing)."""
        if not item or any(k not in item for k in keys):
            return None
        if projection == "ALL":
            return item
        kept = {*(self._schemas.get(table) or []), *keys, *(attrs if projection == "INCLUDE" else [])}
        return {k: v for k, v in item.items() if k in kept}

    def _key(self, table: str, item: dict[str, Any]) -> dict[str, Any]:
        if table not in self._schemas:
            schema = self.raw.describe_table(TableName=table)["Table"]["KeySchema"]
            self._schemas[table] = [k["AttributeName"] for k in schema]
        return {name: item[name] for name in self._schemas[table]}

    def _targets(self, op: str, params: dict[str, Any]) -> list[tuple[str, dict[str, Any], int, int]]:
        """(table, key, factor, size of the request's own item) per item a write touches."""
        if op == "TransactWriteItems":
            out = []
            for entry in params.get("TransactItems") or []:
                for _kind, spec in entry.items():
                    item = spec.get("Item")
                    key = spec.get("Key") or self._key(spec["TableName"], item)
                    out.append((spec["TableName"], key, 2, item_size(item) if item else 0))
            return out
        if op in ("PutItem", "UpdateItem", "DeleteItem"):
            item = params.get("Item")
            key = params.get("Key") or self._key(params["TableName"], item)
            return [(params["TableName"], key, 1, item_size(item) if item else 0)]
        if op == "BatchWriteItem":
            out = []
            for table, reqs in (params.get("RequestItems") or {}).items():
                for r in reqs:
                    if "PutRequest" in r:
                        item = r["PutRequest"]["Item"]
                        out.append((table, self._key(table, item), 1, item_size(item)))
                    else:
                        out.append((table, r["DeleteRequest"]["Key"], 1, 0))
            return out
        return []

    # -- hooks -------------------------------------------------------------------------------------------------

    def _before(self, request: Any = None, event_name: str = "", **_: Any) -> None:
        self._local.op, self._local.targets = "", []
        if not self.enabled:
            return
        try:
            self._targets_of(event_name.rsplit(".", 1)[1], request)
        except Exception:  # a meter never fails the request it watches: the miss is counted and printed
            self._add("unsized", 1)

    def _targets_of(self, op: str, request: Any) -> None:
        params = json.loads(getattr(request, "body", b"") or b"{}")
        self._local.op, self._local.params = op, params
        self._local.targets = [(t, k, f, s, self._stored_item(t, k)) for t, k, f, s in self._targets(op, params)]

    def _add(self, name: str, value: float) -> None:
        """``value`` units of ``name`` (``wru`` or ``rru``), in all and by operation (``"wru dynamodb:PutItem"``)."""
        op = getattr(self._local, "op", "")
        with self._lock:
            units = self.units.setdefault(self.meter.current(), Counter())
            units[name] += value  # type: ignore[assignment]
            units[f"{name} dynamodb:{op}"] += value  # type: ignore[assignment]

    def _add_item(self, kind: str, value: int) -> None:
        """Write units by the kind of item written (``"item runs:RUN in a transaction"``): what a run's work writes."""
        with self._lock:
            self.units.setdefault(self.meter.current(), Counter())[f"item {kind}"] += value

    def by_item(self, *origins: str) -> dict[str, int]:
        """The write units of these origins by kind of item, most first."""
        got = self.of(*origins)
        return {k.removeprefix("item "): int(v) for k, v in got.most_common() if k.startswith("item ")}

    def _after(self, response_dict: Any = None, event_name: str = "", **_: Any) -> None:
        try:
            self._count(response_dict)
        except Exception:  # as in ``_before``
            self._add("unsized", 1)

    def _count(self, response_dict: Any) -> None:
        op, params = getattr(self._local, "op", ""), getattr(self._local, "params", {})
        ok = bool(response_dict) and int(response_dict.get("status_code") or 200) < 300
        for table, key, factor, own, before in getattr(self._local, "targets", []):
            after = self._stored_item(table, key) if ok else before
            size = max(item_size(before), item_size(after), own) if ok else item_size(before)
            units = factor * max(1, math.ceil(size / 1024))
            self._add("wru", units)
            self._add_item(f"{_kind(table, key)}{' in a transaction' if factor == 2 else ''}", units)
            if ok and self._gsis(table):
                self._add("gsi", self._index_units(table, before, after))
        self._local.targets = []
        if ok and op:
            self._reads(op, params, json.loads(response_dict.get("body") or b"{}"))

    def _whole(self, table: str, item: dict[str, Any], projected: bool, key: dict[str, Any] | None = None) -> int:
        """An item a read returned, sized whole: read again by ``key`` (or the key attributes it holds) when the
        read projected it; as returned when it holds no key to read it by."""
        if not projected:
            return item_size(item)
        try:
            return self._stored(table, key or self._key(table, item))
        except KeyError:
            self._add("unsized", 1)
            return item_size(item)

    def _reads(self, op: str, params: dict[str, Any], data: dict[str, Any]) -> None:
        factor = 1.0 if params.get("ConsistentRead") else 0.5
        projected = "ProjectionExpression" in params or "AttributesToGet" in params
        table = params.get("TableName", "")
        if op == "GetItem":
            item = data.get("Item")
            whole = self._whole(table, item, projected, params.get("Key")) if item else 0
            self._add("rru", factor * max(1, math.ceil(whole / 4096)))
        elif op in ("Query", "Scan"):
            size = sum(self._whole(table, i, projected) for i in data.get("Items") or [])
            self._add("rru", factor * max(1, math.ceil(size / 4096)))
        elif op == "TransactGetItems":
            specs = [g["Get"] for g in params.get("TransactItems") or []]
            for spec, r in zip(specs, data.get("Responses") or [], strict=False):
                item = r.get("Item")
                proj = "ProjectionExpression" in spec
                whole = self._whole(spec["TableName"], item, proj, spec.get("Key")) if item else 0
                self._add("rru", 2 * max(1, math.ceil(whole / 4096)))
        elif op == "BatchGetItem":
            for name, items in (data.get("Responses") or {}).items():
                spec = (params.get("RequestItems") or {}).get(name) or {}
                each = 1.0 if spec.get("ConsistentRead") else 0.5
                proj = "ProjectionExpression" in spec or "AttributesToGet" in spec
                for i in items:
                    self._add("rru", each * max(1, math.ceil(self._whole(name, i, proj) / 4096)))

    def of(self, *origins: str) -> Counter[str]:
        """The units of these origins (a run id's includes its consumers', ``<runId>|...``, as the meter's usage)."""
        out: Counter[str] = Counter()
        with self._lock:
            for name, units in self.units.items():
                if name in origins or ("|" in name and name.split("|", 1)[0] in origins):
                    out.update(units)
        return out

    def reset(self) -> None:
        with self._lock:
            self.units.clear()
