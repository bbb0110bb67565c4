"""The manifest's Secrets Manager secrets, each with a value CloudFormation generates (never in the template), and
its KMS keys (values the application encrypts before it stores them).

CDK context ``restoreRegion=<region>`` (off by default) readies them for a restore in that region
(docs/operations.md, "Restore"; docs/decisions/0157-a-restore-that-gives-back-a-working-host.md): the signing key is
multi-region (its replica there is the operator's ``aws kms replicate-key``, after the first deploy) and the pepper
and tombstone secrets are replicated there by Secrets Manager. Without them restored tables are no host: no API key
verifies (its hash is keyed by the pepper), no erased run's tombstone is found (its key is keyed by the tombstone
secret), no webhook secret opens (sealed by the signing key). The cursor secret is not replicated: a new value only
restarts outstanding listings. A multi-region key cannot be made from an existing one, so the flag is set at a
stack's first deploy (on an existing stack it replaces the signing key: see the docs).

CDK context ``signingKeyArn=<key ARN>`` is for the stack a restore deploys in that region: it uses that key (the
replica) instead of creating one, so the restored signing table's secrets open.
"""

from __future__ import annotations

import re

from aws_cdk import aws_kms as kms
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from infra.constructs.common import acknowledge, pascal, removal_policy
from shared import manifest

_NO_ROTATION_LAMBDA = {
    manifest.CURSOR: "No rotation Lambda: the value is an HMAC key for list cursors, which hold no data and only "
    "live for one listing. Rotating it (put a new value) only makes outstanding cursors answer 400; functions pick "
    "the new value up on their next cold start.",
    manifest.APIKEY_PEPPER: "No rotation Lambda: the value is the pepper of the stored API-key hashes, and a key "
    "hashed under a pepper can only be verified with it. The operator rotates it with a dual-pepper window "
    "(openwop-serverless keys rotate-pepper, re-issue keys, keys finish-rotation; docs/operations.md).",
    manifest.TOMBSTONE: "No rotation Lambda, and never rotated: the value keys the hash under which an erased run's "
    "tombstone is stored (never the run id), and a tombstone is found only under the key it was written with; a new "
    "value would let a late write of an erased run through.",
}
# The secrets a restore cannot do without (restored hashes and tombstones are keyed by their values)
REPLICATED = (manifest.APIKEY_PEPPER, manifest.TOMBSTONE)
_REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-[0-9]$")
_KEY_ARN = re.compile(r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/[A-Za-z0-9-]+$")


def restore_region(scope: Construct) -> str | None:
    """CDK context ``restoreRegion``: a region name, or none; anything else stops synthesis."""
    raw = scope.node.try_get_context("restoreRegion")
    if raw is None or raw == "":
        return None
    if not _REGION.match(str(raw)):
        raise ValueError(f"context restoreRegion={raw!r}: expected a region name (eu-west-2)")
    return str(raw)


def signing_key_arn(scope: Construct) -> str | None:
    """CDK context ``signingKeyArn``: the ARN of an existing key (a restore's replica), or none."""
    raw = scope.node.try_get_context("signingKeyArn")
    if raw is None or raw == "":
        return None
    if not _KEY_ARN.match(str(raw)):
        raise ValueError(
            f"context signingKeyArn={raw!r}: expected a KMS key ARN (arn:aws:kms:<region>:<account>:key/..)"
        )
    return str(raw)


class HostSecrets(Construct):
    """One secret per ``manifest.SECRETS`` entry; construct ids are ``<Key>Secret`` (``CursorSecret``). One
    symmetric KMS key per ``manifest.KEYS`` entry (``<Key>Key``: ``SigningKey``), rotated yearly; the key policy is
    the account's default, so only the roles whose IAM policy names the key (``Function.keys``) can use it."""

    def __init__(self, scope: Construct, construct_id: str, *, stage: str) -> None:
        super().__init__(scope, construct_id)
        self.restore_region = replica = restore_region(self)
        imported = signing_key_arn(self)
        self._secrets: dict[str, secretsmanager.Secret] = {}
        for spec in manifest.SECRETS:
            secret = secretsmanager.Secret(
                self,
                f"{pascal(spec.key)}Secret",
                description=f"OpenWOP {spec.key}: {spec.purpose}",
                generate_secret_string=secretsmanager.SecretStringGenerator(
                    password_length=64,
                    exclude_punctuation=True,
                    **({"secret_string_template": "{}", "generate_string_key": spec.json_key} if spec.json_key else {}),
                ),
                removal_policy=removal_policy(stage),
                replica_regions=[secretsmanager.ReplicaRegion(region=replica)]
                if replica and spec.key in REPLICATED
                else None,
            )
            acknowledge(secret, "AwsSolutions-SMG4", _NO_ROTATION_LAMBDA[spec.key])
            self._secrets[spec.key] = secret
        self._keys: dict[str, kms.IKey] = {}
        for key_spec in manifest.KEYS:
            name = f"{pascal(key_spec.key)}Key"
            if imported and key_spec.key == manifest.SIGNING:
                self._keys[key_spec.key] = kms.Key.from_key_arn(self, name, imported)
                continue
            self._keys[key_spec.key] = kms.Key(
                self,
                name,
                description=f"OpenWOP {key_spec.key}: {key_spec.purpose}",
                enable_key_rotation=True,
                removal_policy=removal_policy(stage),
                multi_region=True if replica else None,  # absent, not false: an existing key stays as it is
            )

    def key(self, key: str) -> kms.IKey:
        return self._keys[key]

    def secret(self, key: str) -> secretsmanager.Secret:
        return self._secrets[key]
