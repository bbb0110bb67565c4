"""The webhook repositories:

- host table ``WEBHOOK#<tenant>`` / ``<webhookId>`` (webhook ids start ``<tenant>/``): the subscriptions, and
  ``#rules`` (sorts before them): the tenant's sampling rules version, read with them by one Query;
- host table ``WEBHOOKDL#<webhookId>`` / ``<deadLetteredAt>#<deliveryId>``: the dead letters (with a TTL);
- signing table ``WEBHOOK#<tenant>`` / ``<webhookId>``: the sealed signing secrets.
"""

from __future__ import annotations

from typing import Any

from shared.ports import HostStore

SUB_PK = "WEBHOOK#"
RULES_SK = "#rules"
DL_PK = "WEBHOOKDL#"


def _subscriptions_prefix(tenant: str) -> str:
    return f"{tenant}/"


class DynamoWebhookRepository:
    def __init__(self, host: HostStore) -> None:
        self._host = host

    def get_subscription(self, tenant: str, webhook_id: str) -> dict[str, Any] | None:
        return self._host.get_item(SUB_PK + tenant, webhook_id)

    def get_subscription_and_run(
        self, tenant: str, webhook_id: str, run_id: str
    ) -> tuple[dict[str, Any] | None, int | None]:
        return self._host.get_item_and_run(SUB_PK + tenant, webhook_id, run_id)

    def list_subscriptions(self, tenant: str, *, consistent: bool = False) -> list[tuple[str, dict[str, Any]]]:
        return self._host.query(SUB_PK + tenant, _subscriptions_prefix(tenant), consistent=consistent)

    def get_interest(self, tenant: str) -> tuple[list[dict[str, Any]], str | None]:
        rows = self._host.query(SUB_PK + tenant, consistent=False)
        subs = [doc for sk, doc in rows if sk != RULES_SK]
        return subs, next((str(doc["version"]) for sk, doc in rows if sk == RULES_SK), None)

    def put_subscription(
        self,
        tenant: str,
        webhook_id: str,
        doc: dict[str, Any],
        *,
        if_absent: bool = False,
        if_equals: dict[str, Any] | None = None,
    ) -> bool:
        return self._host.put_item(SUB_PK + tenant, webhook_id, doc, if_absent=if_absent, if_equals=if_equals)

    def delete_subscription(self, tenant: str, webhook_id: str) -> bool:
        return self._host.delete_item(SUB_PK + tenant, webhook_id)

    def put_rules_version(self, tenant: str, version: dict[str, Any]) -> None:
        self._host.put_item(SUB_PK + tenant, RULES_SK, version)

    def list_dead_letters(self, webhook_id: str) -> list[tuple[str, dict[str, Any]]]:
        return self._host.query(DL_PK + webhook_id)

    def put_dead_letter(self, webhook_id: str, record: dict[str, Any], *, expires_at: int) -> tuple[str, str]:
        pk, sk = DL_PK + webhook_id, f"{record['deadLetteredAt']}#{record['deliveryId']}"
        self._host.put_item(pk, sk, record, expires_at=expires_at)
        return pk, sk


class DynamoWebhookSecretRepository:
    def __init__(self, signing: HostStore) -> None:
        self._signing = signing

    def get_secret(self, tenant: str, webhook_id: str) -> dict[str, Any] | None:
        return self._signing.get_item(SUB_PK + tenant, webhook_id)

    def put_secret(
        self,
        tenant: str,
        webhook_id: str,
        record: dict[str, Any],
        *,
        if_absent: bool = False,
        if_equals: dict[str, Any] | None = None,
    ) -> bool:
        return self._signing.put_item(SUB_PK + tenant, webhook_id, record, if_absent=if_absent, if_equals=if_equals)

    def delete_secret(self, tenant: str, webhook_id: str) -> None:
        self._signing.delete_item(SUB_PK + tenant, webhook_id)
