"""Webhook subscriptions, their sealed signing secrets and their dead letters (RFC 0188)."""

from __future__ import annotations

from typing import Any, Protocol


class WebhookRepository(Protocol):
    def get_subscription(self, tenant: str, webhook_id: str) -> dict[str, Any] | None: ...
    def get_subscription_and_run(
        self, tenant: str, webhook_id: str, run_id: str
    ) -> tuple[dict[str, Any] | None, int | None]:
        """The subscription, and the TTL (epoch seconds, 0 for none) of ``run_id``'s run item, None when the run
        has none (erased): one strongly consistent read of both."""
        ...

    def list_subscriptions(self, tenant: str, *, consistent: bool = False) -> list[tuple[str, dict[str, Any]]]:
        """The tenant's (webhookId, subscription), in webhookId order."""
        ...

    def get_interest(self, tenant: str) -> tuple[list[dict[str, Any]], str | None]:
        """The tenant's subscriptions and its sampling rules version (None: it never had a rule), read together
        eventually consistent (what the fan-out reads, and keeps a short while)."""
        ...

    def put_subscription(
        self,
        tenant: str,
        webhook_id: str,
        doc: dict[str, Any],
        *,
        if_absent: bool = False,
        if_equals: dict[str, Any] | None = None,
    ) -> bool: ...
    def delete_subscription(self, tenant: str, webhook_id: str) -> bool:
        """True when the subscription existed."""
        ...

    def put_rules_version(self, tenant: str, version: dict[str, Any]) -> None:
        """A new version of the tenant's sampling rules (``{version, changedAt}``), read with its subscriptions."""
        ...

    def list_dead_letters(self, webhook_id: str) -> list[tuple[str, dict[str, Any]]]:
        """The subscription's (cursor, record), in no particular order (the cursor orders them: time, delivery)."""
        ...

    def put_dead_letter(self, webhook_id: str, record: dict[str, Any], *, expires_at: int) -> tuple[str, str]:
        """Store a dead letter (keyed by its ``deadLetteredAt`` and ``deliveryId``) until ``expires_at``; the
        stored item's reference, which the run links so that its erasure deletes the record."""
        ...


class WebhookSecretRepository(Protocol):
    """The sealed signing secrets of subscriptions (a table only registration and delivery read)."""

    def get_secret(self, tenant: str, webhook_id: str) -> dict[str, Any] | None: ...
    def put_secret(
        self,
        tenant: str,
        webhook_id: str,
        record: dict[str, Any],
        *,
        if_absent: bool = False,
        if_equals: dict[str, Any] | None = None,
    ) -> bool: ...
    def delete_secret(self, tenant: str, webhook_id: str) -> None: ...
