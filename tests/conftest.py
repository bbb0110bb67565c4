"""Session fixtures for the embedded AWS (moto in-process) and the local HTTP host.

``local_aws`` starts moto once per test session and bootstraps the manifest stack; ``host`` also seeds two
tenants and serves the API on a free port. Tests must not depend on each other's data: use fresh ids
(``tests.helpers.unique``).

Caution: ``moto.mock_aws`` resets moto's global backends, which are the same backends the in-process server
uses. A test that enters ``mock_aws`` while ``local_aws`` is alive wipes the bootstrapped stack; call
``local_aws.bootstrap()`` again (idempotent) if both are needed in one session.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from shared.local.front import LocalFront
    from shared.local.stack import LocalAws

TEST_API_KEYS = {"test-key-a": "tenant-a", "test-key-b": "tenant-b"}


def pytest_configure(config: pytest.Config) -> None:
    for name in ("moto", "werkzeug"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


# The suite's longest files, longest first (seconds measured in a full run on a loaded 2-core machine): pytest-xdist
# (``--dist loadfile``) hands files to its workers in collection order, so these go out first and no worker is left
# running one of them alone after the others have finished. Every other file keeps its place behind them.
LONGEST_FIRST = (
    "test_example_pydantic_ai.py",  # ~700 s
    "test_example_openai_agents.py",  # ~530 s
    "test_local_state.py",  # ~560 s over 27 tests
    "test_openapi_truth.py",  # ~450 s: schemathesis
    "test_scale.py",  # ~350 s
    "test_deployable.py",  # ~230 s: CDK synthesis
    "test_erasure_lineage.py",  # ~220 s
    "test_suites_tenant.py",  # ~190 s
    "test_viewer.py",  # ~180 s: chromium
    "test_webhooks.py",  # ~175 s
    "test_readme_tour.py",  # ~175 s
    "test_readme_release.py",  # ~170 s
    "test_layer.py",  # ~170 s: pip
    "test_local_front.py",  # ~145 s
    "test_local_secrets.py",  # ~150 s: hosts killed and started again
    "test_effects_after_stop.py",  # ~130 s
    "test_conformance_profile.py",  # ~125 s
    "test_readme_agents.py",  # ~120 s
    "test_viewer_links.py",  # ~120 s
    "test_readme_registration.py",  # ~120 s
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: each file's tests stay together


@pytest.fixture(scope="session")
def local_aws() -> Iterator[LocalAws]:
    """moto server in this process, patched and bootstrapped from shared.manifest; stopped at session end."""
    import os

    from shared.local.stack import LocalAws

    # Webhook retries keep the deployed schedule's shape, each delay divided by 240 instead of the local 30:
    # 1, 1, 1, 1, 2, 4, 4 s, so an exhausted delivery is dead-lettered within a test's patience (~14 s)
    os.environ.setdefault("WEBHOOK_RETRY_DIVISOR", "240")
    aws = LocalAws()
    aws.start()
    try:
        aws.bootstrap()
        yield aws
    finally:
        aws.stop()


@dataclass(frozen=True)
class Host:
    base_url: str
    key_a: str
    key_b: str
    tenant_a: str
    tenant_b: str
    aws: LocalAws
    front: LocalFront
    seeded: bool

    def client(self, key: str) -> Any:
        from openwop_client import OpenwopClient

        return OpenwopClient(self.base_url, key)


@pytest.fixture(scope="session")
def host(local_aws: LocalAws) -> Iterator[Host]:
    """The local host over HTTP: two seeded tenants (``test-key-a`` → tenant-a, ``test-key-b`` → tenant-b)."""
    from shared.local.commands import seed
    from shared.local.front import LocalFront

    seeded = seed(TEST_API_KEYS)
    front = LocalFront()
    base_url = front.start("127.0.0.1", 0)
    try:
        yield Host(base_url, "test-key-a", "test-key-b", "tenant-a", "tenant-b", local_aws, front, seeded)
    finally:
        front.stop()


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[Any, str]]:
    """The loopback HTTP tool server (``shared.local.demo_tools``), one per test module: ``(server, url)``.
    A module with a server of its own (MCP, a chat-completions server) defines its own ``server``."""
    from shared.local.demo_tools import DemoToolServer

    s = DemoToolServer()
    url = s.start()
    yield s, url
    s.stop()


@pytest.fixture()
def timer() -> Iterator[Any]:
    """The API-key cache on a hand-moved clock (``tests.helpers.FakeTimer``); reset afterwards."""
    from shared.services import auth
    from tests.helpers import FakeTimer

    fake = FakeTimer()
    auth.reset_cache(timer=fake)
    yield fake
    auth.reset_cache()
