"""A restore to a point before an erasure brings the erased run back; ``runs reapply-erasures`` erases it again.

The restore is modelled on the local stack: the erased run's items of the runs and tool-calls tables, as they were
before its erasure, are put back and its tombstone taken out (what a table restored to that point holds), while the
replaced runs table, the erasure log, is a table of its own. (Its events are left out of the model: putting them
back would fan them out to the webhook subscriptions other tests of the session left registered.)
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from shared.protocol.ids import project_id
from tests.wire import raw, wait_terminal
from tests.workflows import register_scripted_agent


def _ports() -> Any:
    from shared.wiring import get_ports

    return get_ports()


def _items(ddb: Any, table: str, key: str, value: str) -> list[dict[str, Any]]:
    resp = ddb.query(
        TableName=table,
        KeyConditionExpression="#k = :v",
        ExpressionAttributeNames={"#k": key},
        ExpressionAttributeValues={":v": {"S": value}},
    )
    return list(resp["Items"])


def _run(host: Any) -> str:
    script = {"calls": [{"tool": "conformance.eval:echo", "args": {"note": uuid.uuid4().hex}}], "answer": "done"}
    body = {"workflowId": register_scripted_agent("tenant-a", "restore"), "inputs": {"script": script}}
    r = raw(host.base_url, "POST", "/runs", body, key=host.key_a)
    assert r.status == 201, r.text
    run_id = str(r.json["runId"])
    assert wait_terminal(host.client(host.key_a), run_id).status == "completed"
    return run_id


def _status(host: Any, run_id: str) -> int:
    return raw(host.base_url, "GET", f"/runs/{project_id(run_id)}", key=host.key_a).status


def test_a_restore_to_before_an_erasure_is_undone_by_reapplying_the_erasures(host, capsys) -> None:
    from shared.local.commands import main
    from shared.local.ddb_streams import wait_for_stream_idle
    from shared.settings import get_settings

    settings = get_settings()
    ddb = host.aws.client("dynamodb")
    # Given two completed runs that made a tool call, and the items of one as a backup taken now holds them
    kept, erased = _run(host), _run(host)
    backup = {
        settings.runs_table: _items(ddb, settings.runs_table, "pk", erased),
        settings.tool_calls_table: _items(ddb, settings.tool_calls_table, "runId", erased),
    }
    assert len(backup[settings.runs_table]) >= 2 and backup[settings.tool_calls_table]
    # and that one is then erased through the API
    assert raw(host.base_url, "DELETE", f"/runs/{project_id(erased)}", key=host.key_a).status == 204
    assert wait_for_stream_idle(30)
    assert _status(host, erased) == 404 and _ports().runs.is_tombstoned(erased)
    # and the runs table the restore replaces is kept aside with its tombstones (the erasures after the backup)
    replaced = f"openwop-runs-replaced-{uuid.uuid4().hex[:8]}"
    ddb.create_table(
        TableName=replaced,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    try:
        pages = ddb.get_paginator("scan").paginate(
            TableName=settings.runs_table,
            FilterExpression="begins_with(pk, :erased)",
            ExpressionAttributeValues={":erased": {"S": "ERASED#"}},
        )
        tombstones = [item for page in pages for item in page["Items"]]
        assert tombstones
        for item in tombstones:
            ddb.put_item(TableName=replaced, Item=item)
        # When the tables are restored to the backup: the erased run's items are back, its tombstone is not
        _ports().runs.delete_tombstone(erased)
        for table, items in backup.items():
            for item in items:
                ddb.put_item(TableName=table, Item=item)
        # Then the restore alone serves the erased run again (the defect)
        assert _status(host, erased) == 200
        # When the operator re-applies the erasures with the replaced table's tombstones
        assert main(["runs", "reapply-erasures", "--tombstones-from", replaced]) == 0
        result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert wait_for_stream_idle(30)
        # Then the tombstones are copied in and the erased run is erased again, through the API and in the tables
        assert result["tombstonesCopied"] == len(tombstones) and result["runsErased"] >= 1
        assert _ports().runs.is_tombstoned(erased)
        assert _status(host, erased) == 404
        listed = raw(host.base_url, "GET", "/runs?limit=100", key=host.key_a)
        assert listed.status == 200 and erased not in listed.text
        assert _items(ddb, settings.runs_table, "pk", erased) == []
        assert _items(ddb, settings.tool_calls_table, "runId", erased) == []
        # and a late write for it is refused, as after any erasure
        r = raw(host.base_url, "POST", f"/runs/{project_id(erased)}:fork", {"mode": "replay"}, key=host.key_a)
        assert (r.status, r.json["error"]) == (404, "not_found")
        # and the run never erased is untouched
        assert _status(host, kept) == 200
        # and a second pass finds nothing left to erase
        assert main(["runs", "reapply-erasures"]) == 0
        again = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert again == {"tombstonesCopied": 0, "runsErased": 0}
    finally:
        ddb.delete_table(TableName=replaced)
