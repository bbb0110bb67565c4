"""The manifest's Secrets Manager secrets, each with a value CloudFormation generates (never in the template), and
its KMS keys (values the application encrypts before it stores them)."""

from __future__ import annotations

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


class HostSecrets(Construct):
    """One secret per ``manifest.SECRETS`` entry; construct ids are ``<Key>Secret`` (``CursorSecret``). One
    symmetric KMS key per ``manifest.KEYS`` entry (``<Key>Key``: ``SigningKey``), rotated yearly; the key policy is
    the account's default, so only the roles whose IAM policy names the key (``Function.keys``) can use it."""

    def __init__(self, scope: Construct, construct_id: str, *, stage: str) -> None:
        super().__init__(scope, construct_id)
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
            )
            acknowledge(secret, "AwsSolutions-SMG4", _NO_ROTATION_LAMBDA[spec.key])
            self._secrets[spec.key] = secret
        self._keys: dict[str, kms.Key] = {}
        for key_spec in manifest.KEYS:
            self._keys[key_spec.key] = kms.Key(
                self,
                f"{pascal(key_spec.key)}Key",
                description=f"OpenWOP {key_spec.key}: {key_spec.purpose}",
                enable_key_rotation=True,
                removal_policy=removal_policy(stage),
            )

    def key(self, key: str) -> kms.Key:
        return self._keys[key]

    def secret(self, key: str) -> secretsmanager.Secret:
        return self._secrets[key]
