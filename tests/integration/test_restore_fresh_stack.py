"""docs/operations.md "Restore a whole host", rehearsed on moto into a fresh stack (issue 37 item 9, decision 0162).

The source is the session's local stack: a tenant with an API key (hashed under the pepper), a webhook subscription
(its secret sealed by the signing key), a completed run and a run erased through the API after the backup point. An
operator then follows the documented steps with boto3 against the same moto: the tables restored from on-demand
backups taken at that point (so the erased run's items are back and its tombstone is not), a fresh stack of another
stage in the same region (its own tables with streams and TTL, bucket, secrets and credentials prefix; the old signing
key, as ``signingKeyArn`` gives it; a CloudFormation stack whose outputs name them, as the deployed one's do), the
pepper and tombstone secrets copied from their replicas in another region, the items copied in the documented order
(the tenant's: the session's other tests' items are left out),
and ``runs reapply-erasures --tombstones-from <old runs table> --stack <new stack> --region <its region>``. The host
is then pointed at the fresh stack's outputs (the environment a deployed function gets) and checked over HTTP.

What moto cannot model (decision 0162): a ciphertext of a multi-region key does not open under its replica in moto, so
the key is the same-region variant; the fresh stack shares the session's queue, state machines, functions and role
(they hold no data a restore moves: the state machines name only functions, which read the environment).
"""

from __future__ import annotations

import json
import os
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest

from shared.cli.webhook_receiver import WebhookReceiver, verify_v1
from shared.protocol.ids import project_id
from tests.helpers import eventually
from tests.wire import all_events, raw, wait_terminal
from tests.workflows import register_scripted_agent

RESTORE_REGION = "eu-west-1"  # R: where the pepper and tombstone secrets keep their replicas (``restoreRegion``)
COPY_ORDER = ("runs", "toolcalls", "idempotency", "signing", "events")  # step 5 (manifest keys); then, fanned out, host


def _cold_start() -> None:
    """What a function's next cold start forgets: the settings, the ports (their secret values) and every warm
    cache of a key, an opened webhook secret, a tenant's subscriptions, a run's facts or summary."""
    from shared import settings
    from shared.services import auth, stream_interest, summaries, webhook_secrets, webhooks
    from shared.wiring import reset_ports

    settings.get_settings.cache_clear()
    reset_ports()
    auth.reset_cache()
    for cache in (
        webhook_secrets._OPENED,
        stream_interest._NO_SUBSCRIBERS,
        stream_interest._SUBSCRIBED,
        webhooks._RUN_FACTS,
        summaries._summary_cache,
    ):
        cache.clear()


@dataclass
class Rehearsal:
    """What the rehearsal made, undone in reverse order at the end whatever happened."""

    stage: str = field(default_factory=lambda: f"rehearsal{uuid.uuid4().hex[:8]}")
    undo: list[Callable[[], Any]] = field(default_factory=list)

    @property
    def stack(self) -> str:
        return f"OpenWopHost-{self.stage}"


@pytest.fixture
def rehearsal(host: Any) -> Iterator[Rehearsal]:
    """The process's environment saved and given back (the session shares one local stack per worker), with the
    settings, ports and warm caches forgotten; every resource the rehearsal made deleted."""
    from shared.local.ddb_streams import wait_for_stream_idle

    assert wait_for_stream_idle(60)  # nothing of the tests before is delivered under the fresh stack's environment
    saved = dict(os.environ)
    made = Rehearsal()
    try:
        yield made
    finally:
        wait_for_stream_idle(60)  # the fresh stack's records reach their consumers while its environment is set
        for name in set(os.environ) - set(saved):
            os.environ.pop(name, None)
        os.environ.update(saved)
        _cold_start()
        failures = []
        for step in reversed(made.undo):
            try:
                step()
            except Exception as exc:  # every step is tried; the first failure is reported after
                failures.append(exc)
        wait_for_stream_idle(60)
        if failures:
            raise failures[0]


def _scan(ddb: Any, table: str) -> list[dict[str, Any]]:
    return [item for page in ddb.get_paginator("scan").paginate(TableName=table) for item in page["Items"]]


def _names(item: dict[str, Any], tenant: str) -> bool:
    return any(tenant in value.get("S", "") for value in item.values() if isinstance(value, dict))


def _copy_items(ddb: Any, source: str, target: str, tenant: str) -> int:
    """``aws dynamodb scan`` + ``batch-write-item``, 25 items a request, the unprocessed ones sent again. Only the
    items naming the rehearsal's tenant (its runs' ids begin with it): the worker's tables also hold what every
    earlier test of the session wrote, and copying all of it would make this test's time grow with them."""
    items = [item for item in _scan(ddb, source) if _names(item, tenant)]
    for i in range(0, len(items), 25):
        pending: dict[str, Any] = {target: [{"PutRequest": {"Item": item}} for item in items[i : i + 25]]}
        while pending:
            pending = ddb.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}
    return len(items)


def _run(host: Any, key: str, workflow_id: str) -> str:
    script = {"calls": [{"tool": "conformance.eval:echo", "args": {"note": uuid.uuid4().hex}}], "answer": "done"}
    r = raw(host.base_url, "POST", "/runs", {"workflowId": workflow_id, "inputs": {"script": script}}, key=key)
    assert r.status == 201, r.text
    run_id = str(r.json["runId"])
    assert wait_terminal(host.client(key), run_id).status == "completed"
    return run_id


def _get_run(host: Any, key: str, run_id: str) -> Any:
    return raw(host.base_url, "GET", f"/runs/{project_id(run_id)}", key=key)


def _events(host: Any, key: str, run_id: str) -> list[tuple[str, int, str]]:
    return [(e.eventId, e.sequence, e.type) for e in all_events(host.client(key), run_id)]


def _deploy_fresh_stack(host: Any, made: Rehearsal, signing_key_arn: str) -> dict[str, str]:
    """Step 3 as the CDK app deploys it (``-c signingKeyArn=<the old key>``): the stage's tables (streams, TTL) with
    their stream mappings, bucket, generated secrets and credentials prefix, and the outputs naming them. Returns
    the outputs by the environment variable each one sets on the functions."""
    from shared import manifest, settings
    from shared.local import resources

    aws = host.aws
    ddb, lam, sm, s3, cfn = (aws.client(s) for s in ("dynamodb", "lambda", "secretsmanager", "s3", "cloudformation"))
    env = dict.fromkeys(settings.resource_env_vars(), "")
    env.update({q.env_var: os.environ[q.env_var] for q in manifest.QUEUES})  # the session's (see the docstring)
    env.update({m.env_var: os.environ[m.env_var] for m in manifest.STATE_MACHINES})
    for t in manifest.TABLES:
        name = f"{t.local_name}-{made.stage}"
        ddb.create_table(**{**resources.table_spec(t), "TableName": name})
        made.undo.append(lambda n=name: ddb.delete_table(TableName=n))
        ddb.update_time_to_live(
            TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": t.ttl_attribute}
        )
        env[t.env_var] = name
    for table_key, function_name in manifest.STREAM_CONSUMERS:
        stream = ddb.describe_table(TableName=env[manifest.table(table_key).env_var])["Table"]["LatestStreamArn"]
        uuid_ = lam.create_event_source_mapping(
            EventSourceArn=stream,
            FunctionName=manifest.function(function_name).local_name,
            StartingPosition="LATEST",
            BatchSize=100,
            Enabled=True,
        )["UUID"]
        made.undo.append(lambda u=uuid_: lam.delete_event_source_mapping(UUID=u))
    for b in manifest.BUCKETS:
        env[b.env_var] = f"{b.local_name}-{made.stage}"
        s3.create_bucket(Bucket=env[b.env_var])
        made.undo.append(lambda n=env[b.env_var]: s3.delete_bucket(Bucket=n))
    for sec in manifest.SECRETS:
        env[sec.env_var] = f"{sec.local_name}-{made.stage}"
        value = uuid.uuid4().hex
        sm.create_secret(
            Name=env[sec.env_var], SecretString=json.dumps({sec.json_key: value}) if sec.json_key else value
        )
        made.undo.append(lambda n=env[sec.env_var]: sm.delete_secret(SecretId=n, ForceDeleteWithoutRecovery=True))
    for k in manifest.KEYS:
        env[k.env_var] = signing_key_arn
    env[settings.CREDENTIALS_PREFIX_VAR] = f"openwop-serverless-{made.stage}/credentials"
    assert all(env.values()), [k for k, v in env.items() if not v]
    template = {
        "Resources": {"Placeholder": {"Type": "AWS::CloudFormation::WaitConditionHandle"}},
        "Outputs": {settings.output_key(var): {"Value": value} for var, value in env.items()},
    }
    with warnings.catch_warnings():  # moto creates no WaitConditionHandle (and says so): only the outputs matter
        warnings.simplefilter("ignore")
        cfn.create_stack(StackName=made.stack, TemplateBody=json.dumps(template))
    made.undo.append(lambda: cfn.delete_stack(StackName=made.stack))
    return env


def test_a_whole_host_restored_into_a_fresh_stack_as_documented_verifies_keys_opens_secrets_and_keeps_erasures(
    host, rehearsal, capsys
) -> None:
    from shared import manifest
    from shared.local.commands import main
    from shared.local.ddb_streams import wait_for_stream_idle
    from shared.local.environment import REGION
    from shared.services.stream_interest import EVENTUAL_READ_LAG_S, NO_SUBSCRIBER_CACHE_S
    from shared.settings import get_settings
    from shared.storage import schema
    from shared.wiring import get_ports

    made = rehearsal
    aws = host.aws
    ddb, sm, kms = aws.client("dynamodb"), aws.client("secretsmanager"), aws.client("kms")
    sm_r = boto3.session.Session().client("secretsmanager", region_name=RESTORE_REGION, endpoint_url=aws.endpoint)
    old = get_settings()
    old_tables = {t.key: os.environ[t.env_var] for t in manifest.TABLES}
    old_secrets = {manifest.APIKEY_PEPPER: old.apikey_pepper_secret_id, manifest.TOMBSTONE: old.tombstone_secret_id}
    signing_key_arn = kms.describe_key(KeyId=old.signing_key_id)["KeyMetadata"]["Arn"]
    # Given a source stack ready for a restore in R (``restoreRegion``: its pepper and tombstone secrets replicated)
    for secret in old_secrets.values():
        sm.replicate_secret_to_regions(SecretId=secret, AddReplicaRegions=[{"Region": RESTORE_REGION}])
        made.undo.append(
            lambda s=secret: sm.remove_regions_from_replication(SecretId=s, RemoveReplicaRegions=[RESTORE_REGION])
        )
    # and a tenant with an API key (created by the operator's command), a webhook subscription with a generated
    # secret, a registered workflow, and two completed runs each delivered to the subscription
    tenant = f"restore-{uuid.uuid4().hex[:8]}"
    assert main(["keys", "create", "--tenant", tenant]) == 0
    key = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["apiKey"]
    rx = WebhookReceiver()
    rx.start()
    made.undo.append(rx.stop)
    reg = raw(host.base_url, "POST", "/webhooks", {"url": rx.url + "/restore", "events": ["run.completed"]}, key=key)
    assert reg.status == 201, reg.text
    webhook_id, secret = reg.json["webhookId"], reg.json["secret"]
    made.undo.append(lambda: raw(host.base_url, "DELETE", f"/webhooks/{project_id(webhook_id)}", key=key))
    workflow_id = register_scripted_agent(tenant, "restore")
    completed, erased = _run(host, key, workflow_id), _run(host, key, workflow_id)
    for run_id in (completed, erased):
        (hit,) = eventually(lambda r=run_id: rx.deliveries(webhook_id, r), timeout=60)
        assert verify_v1(secret, hit)
    completed_events = _events(host, key, completed)
    assert completed_events[-1][2] == "run.completed"
    assert wait_for_stream_idle(60)
    # and a backup of every table taken now (the backup point)
    backups = {}
    for table_key, table in old_tables.items():
        backups[table_key] = ddb.create_backup(TableName=table, BackupName=f"{table}-{made.stage}")["BackupDetails"]
        made.undo.append(lambda a=backups[table_key]["BackupArn"]: ddb.delete_backup(BackupArn=a))
    # and the second run then erased through the API (its tombstone is only in the live runs table)
    assert raw(host.base_url, "DELETE", f"/runs/{project_id(erased)}", key=key).status == 204
    assert wait_for_stream_idle(60)
    assert _get_run(host, key, erased).status == 404

    # Step 2: every table restored from the backup into a new table (only a source: no stream, TTL or tags)
    restored = {}
    for table_key, backup in backups.items():
        restored[table_key] = f"{old_tables[table_key]}-{made.stage}-restored"
        ddb.restore_table_from_backup(TargetTableName=restored[table_key], BackupArn=backup["BackupArn"])
        made.undo.append(lambda n=restored[table_key]: ddb.delete_table(TableName=n))
    # (the erased run's items are back in them, and its tombstone, written after the backup point, is not)
    assert any(item["pk"]["S"] == erased for item in _scan(ddb, restored[manifest.RUNS]))
    tombstones_restored, tombstones_live = (
        {i["pk"]["S"] for i in _scan(ddb, t) if i["pk"]["S"].startswith(schema.TOMBSTONE_PK_PREFIX)}
        for t in (restored[manifest.RUNS], old.runs_table)
    )
    assert tombstones_restored < tombstones_live

    # Step 3: the fresh stack, deployed with the old signing key; the host's functions get its outputs
    env = _deploy_fresh_stack(host, made, signing_key_arn)
    os.environ.update(env)
    _cold_start()
    fresh = get_settings()
    assert fresh.runs_table != old.runs_table and fresh.apikey_pepper_secret_id != old.apikey_pepper_secret_id
    # (a request before step 4 would meet the stack's own pepper: the old key does not verify)
    assert raw(host.base_url, "GET", "/runs?limit=1", key=key).status == 401
    _cold_start()  # a function keeps a value it has read until its next cold start (step 4's caution)

    # Step 4: the pepper and the tombstone secret copied from their replicas in R into the new stack's
    for secret_key, old_id in old_secrets.items():
        replica = sm_r.describe_secret(SecretId=old_id)
        assert replica.get("PrimaryRegion") == REGION  # the replica, under the primary's name
        value = sm_r.get_secret_value(SecretId=old_id)["SecretString"]
        sm.put_secret_value(
            SecretId=env[next(x for x in manifest.SECRETS if x.key == secret_key).env_var], SecretString=value
        )

    # Step 5: the restored items copied in, events before the host table; the copied events fan out to no one
    for table_key in COPY_ORDER:
        _copy_items(ddb, restored[table_key], env[manifest.table(table_key).env_var], tenant)
    assert wait_for_stream_idle(60)  # the fan-out's iterator age back to 0
    _copy_items(ddb, restored[manifest.HOST], fresh.host_table, tenant)
    subscriptions_ready = time.monotonic() + NO_SUBSCRIBER_CACHE_S + EVENTUAL_READ_LAG_S
    # the restore alone serves the erased run again (its tombstone is not in the restored table)
    assert _get_run(host, key, erased).status == 200 and not get_ports().runs.is_tombstoned(erased)

    # Step 6: the erasures re-applied, as documented, with the tombstones of the runs table the restore replaces
    argv = ["runs", "reapply-erasures", "--tombstones-from", old.runs_table, "--stack", made.stack, "--region", REGION]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert wait_for_stream_idle(60)
    assert result["tombstonesCopied"] == len(tombstones_live) and result["runsErased"] >= 1
    assert get_settings().runs_table == fresh.runs_table  # the command found the fresh stack by its outputs

    # Step 7: the checks. The old key verifies (the pepper)
    listed = raw(host.base_url, "GET", "/runs?limit=100", key=key)
    assert listed.status == 200, listed.text
    assert completed in listed.text and erased not in listed.text
    # the erased run stays erased (the tombstones): 404 with the bytes of an unknown id, its items gone
    unknown = _get_run(host, key, f"{tenant}/r-{'0' * 22}")
    gone = _get_run(host, key, erased)
    assert (gone.status, gone.text) == (unknown.status, unknown.text) and unknown.status == 404
    unknown_log = raw(host.base_url, "GET", f"/runs/{project_id(tenant + '/r-' + '0' * 22)}/events/poll", key=key)
    gone_log = raw(host.base_url, "GET", f"/runs/{project_id(erased)}/events/poll", key=key)
    assert (gone_log.status, gone_log.text) == (unknown_log.status, unknown_log.text) and gone_log.status == 404
    assert get_ports().runs.is_tombstoned(erased)
    for table_key, attribute in ((manifest.RUNS, "pk"), (manifest.TOOL_CALLS, "runId")):
        assert not [
            i for i in _scan(ddb, env[manifest.table(table_key).env_var]) if i.get(attribute, {}).get("S") == erased
        ]
    # the completed run is served with its events
    assert _get_run(host, key, completed).status == 200
    assert _events(host, key, completed) == completed_events
    # and the webhook secret opens (the signing key): a new run's delivery verifies under the original secret
    assert len(rx.deliveries(webhook_id, completed)) == 1  # the copied events were delivered to no one again
    eventually(lambda: time.monotonic() >= subscriptions_ready, timeout=10)  # a warm "no subscriber" has expired
    after = _run(host, key, workflow_id)
    (hit,) = eventually(lambda: rx.deliveries(webhook_id, after), timeout=60)
    assert hit.json()["runId"] == after and hit.json()["event"]["type"] == "run.completed"
    assert verify_v1(secret, hit) and not verify_v1(secret[:-4] + "AAA=", hit)
    assert fresh.signing_key_id == signing_key_arn
