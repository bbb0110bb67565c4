"""Issue 27 §4: which roles of the synthesized prod template can read webhook signing secrets.

A signing secret is readable by a role only if it may both read the signing table's items and decrypt with the
signing key (the table holds nothing but sealed values). Every role of the template is checked, whatever made it
(our functions, the state machines, CDK's custom resources, the backup plan): its own policies, its attached
policies and its managed policies.
"""

from __future__ import annotations

import fnmatch
import json
from pathlib import Path
from typing import Any

import pytest

from shared import manifest
from tests.infra.templates import logical_id, synthesize

pytestmark = pytest.mark.infra

# Every DynamoDB action that hands out item contents (or a copy of the table).
ITEM_READS = (
    "dynamodb:GetItem",
    "dynamodb:BatchGetItem",
    "dynamodb:Query",
    "dynamodb:Scan",
    "dynamodb:PartiQLSelect",
    "dynamodb:GetRecords",
    "dynamodb:ExportTableToPointInTime",
    "dynamodb:RestoreTableToPointInTime",
    "dynamodb:RestoreTableFromBackup",
)
DECRYPTS = ("kms:Decrypt", "kms:ReEncryptFrom")


@pytest.fixture(scope="module")
def prod(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, dict[str, dict[str, Any]]]:
    from infra.app import build_app

    # the opt-ins too (a backup plan, its role), so every role the prod template can hold is in it
    _, stack = build_app(
        {"stage": "prod", "backup": "true", "detailedAlarms": "true"},
        outdir=str(Path(tmp_path_factory.mktemp("cdk.out"))),
        nag=False,
    )
    return stack, synthesize(stack).to_json()["Resources"]


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _role_statements(resources: dict[str, dict[str, Any]], role_id: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for policy in (r for r in resources.values() if r["Type"] == "AWS::IAM::Policy"):
        if {"Ref": role_id} in policy["Properties"].get("Roles", []):
            out.extend(policy["Properties"]["PolicyDocument"]["Statement"])
    for inline in resources[role_id]["Properties"].get("Policies", []):
        out.extend(inline["PolicyDocument"]["Statement"])
    return out


def _allows(statements: list[dict[str, Any]], actions: tuple[str, ...], logical_id: str) -> bool:
    """Whether an Allow names one of ``actions`` (wildcards included) on the resource ``logical_id`` or on ``*``."""
    for s in statements:
        if s.get("Effect") != "Allow" or not any(fnmatch.fnmatch(a, p) for p in _list(s["Action"]) for a in actions):
            continue
        for r in _list(s.get("Resource", [])):
            if r == "*" or logical_id in json.dumps(r):
                return True
    return False


def _role_of(stack: Any, name: str) -> str:
    fn = stack.functions.function(name)
    return logical_id(fn.role)


def test_only_registration_and_delivery_can_read_signing_secrets_and_only_delivery_opens_them(prod) -> None:
    stack, resources = prod
    table_id = str(stack.resolve(stack.tables.table(manifest.SIGNING).node.default_child.ref)["Ref"])
    key_id = str(stack.resolve(stack.secrets.key(manifest.SIGNING).node.default_child.ref)["Ref"])
    roles = {rid: r for rid, r in resources.items() if r["Type"] == "AWS::IAM::Role"}
    assert len(roles) > len(manifest.FUNCTIONS)  # the functions' roles and the others (machines, custom resources)
    # Given every role's statements
    readers, openers = set(), set()
    for rid, role in roles.items():
        statements = _role_statements(resources, rid)
        # (no managed policy that could reach any table or key: only the logging/backup service policies)
        for arn in role["Properties"].get("ManagedPolicyArns", []):
            assert not any(
                w in json.dumps(arn) for w in ("DynamoDB", "Administrator", "PowerUser", "KMS", "ReadOnly")
            ), (rid, arn)
        if _allows(statements, ITEM_READS, table_id):
            readers.add(rid)
        if _allows([st for st in statements if "Condition" not in st], DECRYPTS, key_id):
            openers.add(rid)
    # Then the signing table's items are readable by the registration and delivery functions' roles only
    register, deliver = _role_of(stack, "manage_webhooks"), _role_of(stack, "deliver_webhooks")
    assert readers == {register, deliver}
    # and the signing key decrypts for delivery only (registration seals; it never opens a secret) ...
    assert openers == {deliver}
    assert readers & openers == {deliver}
    # ... but for what registration sealed for an idempotent replay (its answer's secret), and only that
    replay = [st for st in _role_statements(resources, register) if _allows([st], DECRYPTS, key_id)]
    assert replay and all(
        st["Condition"] == {"StringEquals": {"kms:EncryptionContext:purpose": "idempotent-replay"}} for st in replay
    )
    # and the fan-out, which reads every subscription, reads no secret
    assert _role_of(stack, "fanout_webhooks") not in readers | openers


def test_the_signing_key_is_rotated_retained_and_usable_only_through_iam(prod) -> None:
    stack, resources = prod
    key_id = str(stack.resolve(stack.secrets.key(manifest.SIGNING).node.default_child.ref)["Ref"])
    key = resources[key_id]
    # Then the key rotates, is kept when the stack goes, and its policy delegates to IAM (the account root) only:
    # no principal is named in it, so only a role whose own policy names the key can use it
    assert key["Properties"]["EnableKeyRotation"] is True
    assert key["DeletionPolicy"] == "Retain"
    principals = [s["Principal"] for s in key["Properties"]["KeyPolicy"]["Statement"]]
    assert principals and all(json.dumps(p).count(":root") == 1 for p in principals), principals
    # and the signing table is a table of its own, retained, with point-in-time recovery
    table_id = str(stack.resolve(stack.tables.table(manifest.SIGNING).node.default_child.ref)["Ref"])
    assert resources[table_id]["DeletionPolicy"] == "Retain"
