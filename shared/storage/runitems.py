"""How a run's mutable fields are spread over its items (the layout ``shared.keys`` names), for every store that
writes them: the run item (``RUN``: status, ``lastSeq``, times, error, summary, cursor), the state item
(``RUN#STATE``: the folded state) and the tenant-index item (``RUN#INDEX``: the keys of the ``byTenant`` index and
the fields a listing filters on). Status and times stay on the run item too: conditions read them there.

An update names the fields it changes; ``split`` turns it into the run item's update plus one transaction item per
other item it touches, so an append that changes neither the state nor a listed field writes the run item only.
A run stored before this layout (everything on its run item, which carries the index keys) is read the same way:
its first state write moves the state out (the run item's ``state`` is removed in the same transaction).

Every write of the state item also writes ``schema.STATE_STAMP``, a digest of the state it stores, on both the run
item and the state item (same transaction): a reader that batch-reads the two items and finds equal stamps holds the
state the run item's write left, whatever wrote in between (``runs.DynamoRunStore.get_run``; decision 0161).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from shared.storage import schema
from shared.storage.ddb import add_updates, dump, to_item

# The fields of the tenant-index item that can change after the run is created.
LISTED = ("status", "startedAt", "completedAt")
STATE = "state"


@dataclass
class Split:
    run: dict[str, Any]  # the run item's SET fields
    items: list[dict[str, Any]] = field(default_factory=list)  # transaction items for the state and index items
    moves_state: bool = False  # the run item's own ``state`` (older layout) is removed

    def run_expression(self, sets: list[str], names: dict[str, str], removes: Sequence[str] = ()) -> str:
        """The run item's UpdateExpression from its SET clauses (``sets``) and REMOVE names (``removes``), with the
        REMOVE of its old state."""
        gone = list(removes)
        if self.moves_state:
            names["#oldState"] = STATE
            gone.append("#oldState")
        return "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(gone) if gone else "")


def _update(table: str, run_id: str, sk: str, fields: dict[str, Any], expires_at: int) -> dict[str, Any]:
    sets: list[str] = []
    values: dict[str, Any] = {}
    names: dict[str, str] = {}
    add_updates(fields, sets, values, names)
    if expires_at:  # an item this update creates (a run of the older layout) expires with its run
        names["#ttl"] = schema.TTL_ATTRIBUTE
        values[":ttl"] = {"N": str(expires_at)}
        sets.append("#ttl = if_not_exists(#ttl, :ttl)")
    return {
        "Update": {
            "TableName": table,
            "Key": to_item({"pk": run_id, "sk": sk}),
            "UpdateExpression": "SET " + ", ".join(sets),
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }
    }


def stamp(text: str) -> str:
    """A state write's stamp (``schema.STATE_STAMP``): 64 bits of a digest of the stored state's text. Equal stamps
    on the two items mean the state item holds the state the run item was written with (a state written again with
    the same text is the same state)."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=8).hexdigest()


def split(table: str, run_id: str, updates: dict[str, Any], expires_at: int = 0) -> Split:
    out = Split({k: v for k, v in updates.items() if k != STATE})
    if STATE in updates:
        out.moves_state = True
        state = updates[STATE]
        text = dump(state) if state is not None else ""
        out.run[schema.STATE_STAMP] = stamp(text)  # the run item's, in the same transaction
        fields = {STATE: text, schema.STATE_STAMP: stamp(text)}
        out.items.append(_update(table, run_id, schema.RUN_STATE_SK, fields, expires_at))
    listed = {k: v for k, v in updates.items() if k in LISTED}
    if listed:
        out.items.append(_update(table, run_id, schema.RUN_INDEX_SK, listed, expires_at))
    return out


def index_item(run_id: str, tenant: str, created_at: str, fields: dict[str, Any], expires_at: int) -> dict[str, Any]:
    """The tenant-index item of a new run (``byTenant``: partition the tenant, sort the creation time)."""
    return {
        "pk": run_id,
        "sk": schema.RUN_INDEX_SK,
        "tenant": tenant,
        "gsi1pk": tenant,
        "gsi1sk": f"{created_at}#{run_id}",
        "createdAt": created_at,
        **fields,
        schema.TTL_ATTRIBUTE: expires_at,
    }
