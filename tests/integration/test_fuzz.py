"""Schema-driven fuzzing of the served OpenAPI document against the local host (see ``tests/fuzzing.py``).

Every response must be no 5xx, a documented status, the documented content type and a body matching the
documented schema. The figures are printed and written to the ``fuzz_figures`` user property of the test report.
"""

from __future__ import annotations

from tests.fuzzing import MIN_REQUESTS, fuzz, summary


def test_fuzz_the_served_openapi_document(host, record_property):
    # Given every operation of the document, positive and negative examples, then a stateful pass along its links
    figures, elapsed = fuzz(host.base_url, host.key_a)
    line = summary(figures, elapsed)
    print(line)
    record_property("fuzz_figures", line)
    # Then nothing was a server error, every response matched the document, and the run was not vacuous
    assert figures.server_errors == 0, "\n".join(figures.failures[:20])
    assert not figures.failures, "\n".join(figures.failures[:20])
    assert figures.requests >= MIN_REQUESTS, line
