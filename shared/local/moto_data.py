"""moto's data containers that the local state keeps (DynamoDB tables, S3 buckets, Secrets Manager secrets, SQS
queues): taking them for a snapshot and putting them back, and the few direct edits a replay makes — a DynamoDB
stream's backlog, and SQS messages by id (receipt handles die with the process; a replayed send gets its first
message id back)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from shared.local.context import DEFAULT_ACCOUNT, DEFAULT_REGION


def backends() -> dict[str, Any]:
    from moto.dynamodb.models import dynamodb_backends
    from moto.s3.models import s3_backends
    from moto.secretsmanager.models import secretsmanager_backends
    from moto.sqs.models import sqs_backends

    return {
        "dynamodb": dynamodb_backends[DEFAULT_ACCOUNT][DEFAULT_REGION],
        "s3": s3_backends[DEFAULT_ACCOUNT]["aws"],
        "secretsmanager": secretsmanager_backends[DEFAULT_ACCOUNT][DEFAULT_REGION],
        "sqs": sqs_backends[DEFAULT_ACCOUNT][DEFAULT_REGION],
    }


def dynamodb_table(name: str) -> Any:
    """moto's table object (this process's moto: the local host's own reads that the API makes slow)."""
    return backends()["dynamodb"].tables[name]


def collect_state() -> dict[str, Any]:
    """References to the kept containers (pickled as they are at the moment of the call)."""
    b = backends()
    return {
        "dynamodb": b["dynamodb"].tables,
        "s3": b["s3"].buckets,
        "secretsmanager": b["secretsmanager"].secrets,
        "sqs": b["sqs"].queues,
    }


def install_state(state: dict[str, Any]) -> None:
    from moto.s3.models import s3_backends

    b = backends()
    b["dynamodb"].tables = state["dynamodb"]
    b["s3"].buckets = state["s3"]
    for name, bucket in state["s3"].items():
        s3_backends.bucket_accounts[name] = (bucket.partition, DEFAULT_ACCOUNT)
    b["secretsmanager"].secrets = state["secretsmanager"]
    b["sqs"].queues = state["sqs"]


def queue_for(url_or_name: str) -> Any:
    name = url_or_name.rstrip("/").rsplit("/", 1)[-1]
    return backends()["sqs"].queues.get(name)


def sqs_ids_for_handles(body: dict[str, Any], batch: bool) -> tuple[str, list[str]]:
    queue = queue_for(str(body.get("QueueUrl", "")))
    handles = [e.get("ReceiptHandle") for e in body.get("Entries", [])] if batch else [body.get("ReceiptHandle")]
    ids: list[str] = []
    if queue is not None:
        for handle in handles:
            ids.extend(m.id for m in list(queue._messages) if handle and m.had_receipt_handle(handle))
    return str(body.get("QueueUrl", "")), ids


def sqs_delete_ids(queue_url: str, ids: Iterable[str]) -> None:
    queue = queue_for(queue_url)
    if queue is None:
        return
    gone = set(ids)
    with queue._messages_lock:
        for message in [m for m in queue._messages if m.id in gone]:
            queue.pending_messages.discard(message)
        queue._messages = [m for m in queue._messages if m.id not in gone]


def sqs_messages_naming(run_ids: set[str]) -> dict[str, list[str]]:
    """``{queue name: [message id]}`` of the messages, in every queue, whose JSON body names one of ``run_ids`` as
    its ``runId`` (webhook deliveries, waiting, in flight or dead-lettered)."""
    found: dict[str, list[str]] = {}
    for name, queue in list(backends()["sqs"].queues.items()):
        for message in list(queue._messages):
            body = message.body
            if not any(run_id in body for run_id in run_ids):
                continue
            try:
                doc = json.loads(body)
            except ValueError:
                continue
            if isinstance(doc, dict) and doc.get("runId") in run_ids:
                found.setdefault(name, []).append(message.id)
    return found


def sqs_sent_ids(operation: str, response: bytes) -> dict[str, str]:
    """``{entry id (or ""): message id}`` from a SendMessage(Batch) JSON answer."""
    try:
        answer = json.loads(response or b"{}")
    except ValueError:
        return {}
    if operation == "SendMessage":
        return {"": str(answer["MessageId"])} if "MessageId" in answer else {}
    return {str(e["Id"]): str(e["MessageId"]) for e in answer.get("Successful", []) if "MessageId" in e}


def sqs_restore_ids(queue_url: str, replayed: dict[str, str], original: dict[str, str]) -> None:
    """Give the messages a replayed send made the ids the first send answered (a deduplicated send made none)."""
    queue = queue_for(queue_url)
    if queue is None:
        return
    by_id = {m.id: m for m in queue._messages[-len(replayed) :]} if replayed else {}
    for entry, new_id in replayed.items():
        message = by_id.get(new_id)
        if message is not None and entry in original:
            message.id = original[entry]


def clear_stream_backlog(table_name: str) -> None:
    table = backends()["dynamodb"].tables.get(table_name)
    if table is not None and table.stream_shard is not None:
        table.stream_shard.items = []


def flush_stream_backlog() -> int:
    """Hand the stream records replay made (kept on each table's shard while no mapping existed) to the mappings
    bootstrap made, as moto would at the table's next write. Returns how many records were handed over."""
    from moto.awslambda.utils import get_backend

    handed = 0
    for table in list(backends()["dynamodb"].tables.values()):
        shard = table.stream_shard
        if shard is None or not shard.items or not table.lambda_event_source_mappings:
            continue
        for arn, esm in table.lambda_event_source_mappings.items():
            get_backend(DEFAULT_ACCOUNT, arn.split(":")[3]).send_dynamodb_items(arn, shard.items, esm.event_source_arn)
        handed += len(shard.items)
        shard.items = []
    return handed
