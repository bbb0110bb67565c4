"""The caller's eval suites as a tenant's resource (host extension, issue 24).

GET  /host/openwop-serverless/eval-suites                                  200 {suites: [{suiteId, versions, taskCount,
                                                                               createdAt}], nextCursor?} (limit, cursor)
GET  /host/openwop-serverless/eval-suites/{suiteId}                        200 {suiteId, versions, taskCount, createdAt,
                                                                               items: [{version, evalSuiteRef, ...}]}
GET  /host/openwop-serverless/eval-suites/{suiteId}/versions/{version}     200 the suite document
DELETE the same                                                            204; 409 version_conflict naming the eval
                                                                               runs that reference it
POST /host/openwop-serverless/eval-suites/{suiteId}:from-runs              201 a new version built from recorded runs
POST /host/openwop-serverless/eval-suites/{suiteId}:accept                 201 a new version taking an eval run's calls,
                                                                               answers and decisions (issue 25)
Unknown, foreign and malformed ids: the same 404 bytes.
"""

from __future__ import annotations

from functions._common import api
from functions._common.resolver import Response
from shared.services import suites

app = api.build_resolver()


@app.get("/host/openwop-serverless/eval-suites")
def list_eval_suites() -> Response[str]:
    return api.reply(200, suites.list_suites(api.ports(), api.caller(app).tenant, api.query(app)))


@app.get("/host/openwop-serverless/eval-suites/<suite_id>")
def get_eval_suite(suite_id: str) -> Response[str]:
    return api.reply(200, suites.get_suite(api.ports(), api.caller(app).tenant, suite_id))


@app.get("/host/openwop-serverless/eval-suites/<suite_id>/versions/<version>")
def get_eval_suite_version(suite_id: str, version: str) -> Response[str]:
    return api.reply(200, suites.get_version(api.ports(), api.caller(app).tenant, suite_id, version))


@app.delete("/host/openwop-serverless/eval-suites/<suite_id>/versions/<version>")
def delete_eval_suite_version(suite_id: str, version: str) -> Response[str]:
    suites.delete_version(api.ports(), api.caller(app).tenant, suite_id, version)
    return api.empty(204)


@app.post("/host/openwop-serverless/eval-suites/<suite_id>:from-runs")
def suite_from_runs(suite_id: str) -> Response[str]:
    from shared.services import suite_runs  # only this verb loads the run checks

    status, body = suite_runs.from_runs(api.ports(), api.caller(app), suite_id, api.json_body(app))
    return api.reply(status, body)


@app.post("/host/openwop-serverless/eval-suites/<suite_id>:accept")
def suite_accept(suite_id: str) -> Response[str]:
    from shared.services import suite_accept  # only this verb loads the eval engine

    status, body = suite_accept.accept(api.ports(), api.caller(app), suite_id, api.json_body(app))
    return api.reply(status, body)


lambda_handler = api.make_handler(app)
