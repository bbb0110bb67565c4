"""POST /host/openwop-serverless/eval-suites (host extension): register an eval suite for the caller's tenant.

Body: the suite document. 201 {suiteId, version, evalSuiteRef} when new; 200 with the same body when the
identical document is already registered; 409 version_conflict for another document under the same suiteId
and version; 400 validation_error for a suite that does not match the schema, and the one uniform refusal for a
task whose ``sourceRunId`` names a run the tenant cannot use as a source (RFC 0252 §C).
"""

from __future__ import annotations

from functions._common import api
from functions._common.resolver import Response

app = api.build_resolver()


@app.post("/host/openwop-serverless/eval-suites")
def put_eval_suite() -> Response[str]:
    from shared.services import suite_runs  # the source-run checks load the eval service on first use

    caller = api.caller(app)
    status, body = suite_runs.register(api.ports(), caller.tenant, api.json_body(app))
    return api.reply(status, body)


lambda_handler = api.make_handler(app)
