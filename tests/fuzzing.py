"""Schema-driven fuzzing of the served OpenAPI document (schemathesis) against a running host: ``fuzz(url, key)``.

Used by ``make bench`` (the suite runs every schemathesis check instead: ``tests/integration/test_openapi_truth.py``).

Every operation gets positive and negative examples (tenant A's bearer key), then a short stateful pass follows
the document's links (createRun -> get / poll / cancel / fork / diff of the created run). Every response must be
no 5xx, a documented status, the documented content type and a body matching the documented schema. The figures
(requests, 5xx, failures) are printed and written to the ``fuzz_figures`` user property of the test report.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import Failure, FailureGroup
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
EXAMPLES_PER_OPERATION = 20
STATEFUL_EXAMPLES = 8
MIN_REQUESTS = 400
# Registering an MCP server connects to the URL it names (to list the server's tools), and registering a webhook
# resolves its URL (and verifies an opted-in endpoint): fuzzed URLs would make the host resolve and dial arbitrary
# names. Both are covered by explicit tests against loopback servers instead.
NOT_FUZZED = {"registerMcpServer", "registerWebhook"}
# Operations that would hold a connection for their full wait on a live run; their arguments are bounded.
BOUNDED_QUERY = {"streamRunEvents": {"bufferMs": 0}, "pollRunEvents": {"timeout": 1}}


@dataclass
class Figures:
    requests: int = 0
    server_errors: int = 0
    statuses: dict[int, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    def record(self, case: Any, response: Any) -> None:
        self.requests += 1
        self.statuses[response.status_code] = self.statuses.get(response.status_code, 0) + 1
        if response.status_code >= 500:
            self.server_errors += 1
        try:
            case.validate_response(response, checks=CHECKS)
        except (Failure, FailureGroup) as failure:  # a failed check: keep going, report them all at the end
            self.failures.append(f"{case.operation.label} -> {response.status_code}: {failure}")


def _call(case: Any, base_url: str, headers: dict[str, str], session: requests.Session) -> Any:
    bounded = BOUNDED_QUERY.get(case.operation.definition.raw.get("operationId", ""))
    if bounded and isinstance(case.query, dict):
        case.query.update(bounded)
    return case.call(base_url=base_url, headers=headers, session=session, timeout=30)


def fuzz(base_url: str, key: str) -> tuple[Figures, float]:
    """Fuzz every operation (positive and negative examples), then a stateful pass; return figures and seconds."""
    started = time.monotonic()
    schema = schemathesis.openapi.from_url(f"{base_url}/openapi.json")
    headers = {"Authorization": f"Bearer {key}"}
    figures = Figures()
    session = requests.Session()
    fuzz_settings = settings(
        max_examples=EXAMPLES_PER_OPERATION,
        deadline=None,
        database=None,
        derandomize=True,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
        stateful_step_count=6,
    )

    for result in schema.get_all_operations():
        operation = result.ok()
        if operation.definition.raw.get("operationId") in NOT_FUZZED:
            continue
        for mode in (schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE):
            strategy = operation.as_strategy(generation_mode=mode)

            @fuzz_settings
            @given(case=strategy)
            def run(case: Any) -> None:
                figures.record(case, _call(case, base_url, headers, session))

            run()

    class Links(schema.as_state_machine()):  # type: ignore[misc]
        def call(self, case: Any, **kwargs: Any) -> Any:
            response = _call(case, base_url, headers, session)
            figures.record(case, response)
            return response

        def validate_response(self, response: Any, case: Any, **kwargs: Any) -> None:
            return None  # recorded (and checked) in call

    Links.run(settings=settings(fuzz_settings, max_examples=STATEFUL_EXAMPLES))
    return figures, time.monotonic() - started


def summary(figures: Figures, elapsed: float) -> str:
    return (
        f"fuzz: {figures.requests} requests, {figures.server_errors} 5xx, {len(figures.failures)} failed "
        f"checks, {elapsed:.1f} s, statuses {dict(sorted(figures.statuses.items()))}"
    )
