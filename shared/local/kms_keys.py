"""The manifest's KMS keys in the embedded AWS, the same key across restarts of a kept host.

moto's KMS is not kept data (``shared.local.persistence`` keeps DynamoDB, S3, Secrets Manager and SQS), and a key
made again would have a new id and new material: every value sealed before the restart would stop opening. So the
first bootstrap records each key's id and material in a local Secrets Manager secret (kept), and every later
bootstrap puts that key back into moto before it names it with its alias. Local mode only: on AWS the key is a
CloudFormation resource and its material never leaves KMS.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from shared import manifest
from shared.local.context import DEFAULT_ACCOUNT, DEFAULT_REGION


def _material_secret(key: manifest.Key) -> str:
    return f"openwop-local-kms-{key.key}"


def ensure_keys(kms: Any, sm: Any) -> None:
    """Each manifest key under its alias (``alias/openwop-<key>``): made once, then restored from its record."""
    from moto.kms.models import kms_backends

    backend = kms_backends[DEFAULT_ACCOUNT][DEFAULT_REGION]
    for spec in manifest.KEYS:
        aliases = {a["AliasName"] for a in kms.list_aliases()["Aliases"]}
        if spec.local_name in aliases:
            continue
        created = kms.create_key(Description=spec.purpose)["KeyMetadata"]["KeyId"]
        try:
            record = json.loads(sm.get_secret_value(SecretId=_material_secret(spec))["SecretString"])
        except sm.exceptions.ResourceNotFoundException:
            key = backend.keys[created]
            sm.create_secret(
                Name=_material_secret(spec),
                Description="local mode only: a KMS key kept",
                SecretString=json.dumps({"id": key.id, "material": base64.b64encode(key.key_material).decode()}),
            )
            kms.create_alias(AliasName=spec.local_name, TargetKeyId=created)
            continue
        key = backend.keys.pop(created)
        key.id = record["id"]
        key.arn = key.arn.rsplit("/", 1)[0] + "/" + key.id
        key.key_material = base64.b64decode(record["material"])
        backend.keys[key.id] = key
        kms.create_alias(AliasName=spec.local_name, TargetKeyId=key.id)
