"""Patch 15 of the embedded AWS (``shared.local.patches``): a Distributed Map's ``ItemBatcher``.

moto 5.2.5's interpreter (a port of LocalStack's) predates ``ItemBatcher``: its grammar refuses the field, so a
state machine that batches its Map's items cannot even be created. The patch takes the field out of the definition
before moto parses it, keeps it on the Map's iteration component, and batches the items the Map's reader read as
AWS does: each child execution gets ``{"Items": [...]}`` (and ``"BatchInput"`` when given), at most
``MaxItemsPerBatch`` items (or ``MaxItemsPerBatchPath`` of the state's input) and at most
``MaxInputBytesPerBatch`` bytes (default 256 KiB), items in order. ``DescribeMapRun``'s item counts count items
once the Map succeeds (a failed Map's count its batches); its execution counts, child executions.
"""

from __future__ import annotations

import json
import threading
from typing import Any

FIELDS = frozenset(
    {"MaxItemsPerBatch", "MaxItemsPerBatchPath", "MaxInputBytesPerBatch", "MaxInputBytesPerBatchPath", "BatchInput"}
)
MAX_BYTES = 256 * 1024  # AWS's limit of a child execution's input, and MaxInputBytesPerBatch's default

_parsing = threading.local()  # the batchers of the definition being parsed, by Map state name


def take_batchers(definition: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Remove every Map state's ``ItemBatcher`` from ``definition`` (nested Maps and Parallel branches included);
    the removed fields by state name (a state machine's state names are unique across it)."""
    found: dict[str, dict[str, Any]] = {}
    for name, state in (definition.get("States") or {}).items():
        if not isinstance(state, dict):
            continue
        batcher = state.pop("ItemBatcher", None) if state.get("Type") == "Map" else None
        if batcher is not None:
            unknown = set(batcher) - FIELDS if isinstance(batcher, dict) else {"ItemBatcher"}
            if unknown or any(str(k).endswith(".$") for k in (batcher.get("BatchInput") or {})):
                raise ValueError(f"ItemBatcher of {name}: unsupported {sorted(unknown) or 'BatchInput paths'}")
            found[name] = batcher
        for inner in (state.get("ItemProcessor"), state.get("Iterator"), *(state.get("Branches") or [])):
            if isinstance(inner, dict):
                found.update(take_batchers(inner))
    return found


def _path(doc: Any, path: str) -> Any:
    """A ``$.a.b`` reference path of the state's input (the only form the batcher's ``...Path`` fields take)."""
    if not path.startswith("$"):
        raise ValueError(f"not a reference path: {path}")
    for part in [p for p in path[1:].split(".") if p]:
        doc = doc[part]
    return doc


def _limit(batcher: dict[str, Any], field: str, state_input: Any, default: int) -> int:
    value = default
    if field in batcher:
        value = batcher[field]
    elif f"{field}Path" in batcher:
        value = _path(state_input, batcher[f"{field}Path"])
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"ItemBatcher {field} must be a positive integer, got {value!r}")
    return value


def batches(items: list[Any], batcher: dict[str, Any], state_input: Any) -> list[dict[str, Any]]:
    """The child inputs of ``items``: in order, each at most the batcher's item count and input bytes."""
    most = _limit(batcher, "MaxItemsPerBatch", state_input, len(items) or 1)
    max_bytes = _limit(batcher, "MaxInputBytesPerBatch", state_input, MAX_BYTES)
    extra = {"BatchInput": batcher["BatchInput"]} if "BatchInput" in batcher else {}
    base = len(json.dumps({"Items": [], **extra}, separators=(",", ":")))
    out: list[dict[str, Any]] = []
    current: list[Any] = []
    size = base
    for item in items:
        grow = len(json.dumps(item, separators=(",", ":"))) + (1 if current else 0)
        if current and (len(current) >= most or size + grow > max_bytes):
            out.append({"Items": current, **extra})
            current, size = [], base
            grow -= 1
        current.append(item)
        size += grow
    if current:
        out.append({"Items": current, **extra})
    return out


def patch_sfn_item_batcher() -> None:
    """Accept ``ItemBatcher`` in definitions and batch a Distributed Map's items by it."""
    from moto.stepfunctions.parser.asl.component.state.exec.state_map import state_map
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration import (
        distributed_iteration_component as distributed,
    )
    from moto.stepfunctions.parser.asl.parse import asl_parser

    parser = asl_parser.AmazonStateLanguageParser
    original_parse = parser.parse

    def parse(definition: str) -> Any:
        if "ItemBatcher" not in definition:
            return original_parse(definition)
        doc = json.loads(definition)
        _parsing.batchers = take_batchers(doc)
        try:
            return original_parse(json.dumps(doc))
        finally:
            _parsing.batchers = {}

    original_props = state_map.StateMap.from_state_props

    def from_state_props(self: Any, state_props: Any) -> None:
        original_props(self, state_props)
        batcher = getattr(_parsing, "batchers", {}).get(self.name)
        if batcher is not None:
            self.iteration_component.item_batcher = batcher

    original_map_run = distributed.DistributedIterationComponent._map_run

    def map_run(self: Any, env: Any, eval_input: Any) -> None:
        batcher = getattr(self, "item_batcher", None)
        if batcher is None:
            return original_map_run(self, env, eval_input)
        items = list(env.stack.pop())
        children = batches(items, batcher, env.states.get_input())
        env.stack.append(children)
        original_map_run(self, env, eval_input)
        # DescribeMapRun counts items as AWS does, child executions apart (moto counted a job, i.e. a batch, as
        # one item); only a Map whose children all succeeded gets here
        counts = eval_input.map_run_record.item_counter
        for counter in (counts.total, counts.succeeded, counts.results_written):
            counter.offset(len(items) - len(children))
        return None

    parser.parse = staticmethod(parse)  # type: ignore[method-assign]
    state_map.StateMap.from_state_props = from_state_props  # type: ignore[method-assign]
    distributed.DistributedIterationComponent._map_run = map_run  # type: ignore[method-assign]
