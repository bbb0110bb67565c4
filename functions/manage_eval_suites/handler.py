"""The caller's eval suites as a tenant's resource (host extension, issue 24).

GET  /host/openwop-serverless/eval-suites                                  200 {suites: [{suiteId, versions, taskCount,
                                                                               createdAt}], nextCursor?} (limit, cursor)
GET  /host/openwop-serverless/eval-suites/{suiteId}                        200 {suiteId, versions, taskCount, createdAt,
                                                                               items: [{version, evalSuiteRef, ...}]}
GET  /host/openwop-serverless/eval-suites/{suiteId}/versions/{version}     200 the suite document
DELETE the same                                                            204; 409 version_conflict naming the eval
                                                                               runs that reference it
POST /host/openwop-serverless/eval-suites/{suiteId}:from-runs              201 a new version built from recorded runs
POST /host/openwop-serverless/eval-suites/{suiteId}/rules                  201 a sampling rule; GET lists them
DELETE /host/openwop-serverless/eval-suites/{suiteId}/rules/{ruleId}       204
GET  /host/openwop-serverless/eval-suites/{suiteId}/draft                  200 the draft the rules fill
POST /host/openwop-serverless/eval-suites/{suiteId}:publish                201 the draft as a new version
POST /host/openwop-serverless/eval-suites/{suiteId}:accept                 201 a new version taking an eval run's calls,
                                                                               answers and decisions (issue 25)
Unknown, foreign and malformed ids: the same 404 bytes.
"""

from __future__ import annotations

from functions._common import api
from functions._common.resolver import Response
from shared.services import sampling, suites

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


@app.post("/host/openwop-serverless/eval-suites/<suite_id>:publish")
def publish_eval_suite_draft(suite_id: str) -> Response[str]:
    status, body = sampling.publish(api.ports(), api.caller(app), suite_id, api.json_body(app))
    return api.reply(status, body)


@app.get("/host/openwop-serverless/eval-suites/<suite_id>/rules")
def list_eval_suite_rules(suite_id: str) -> Response[str]:
    return api.reply(200, sampling.list_rules(api.ports(), api.caller(app), suite_id))


@app.post("/host/openwop-serverless/eval-suites/<suite_id>/rules")
def create_eval_suite_rule(suite_id: str) -> Response[str]:
    return api.reply(201, sampling.register_rule(api.ports(), api.caller(app), suite_id, api.json_body(app)))


@app.delete("/host/openwop-serverless/eval-suites/<suite_id>/rules/<rule_id>")
def delete_eval_suite_rule(suite_id: str, rule_id: str) -> Response[str]:
    sampling.delete_rule(api.ports(), api.caller(app), suite_id, rule_id)
    return api.empty(204)


@app.get("/host/openwop-serverless/eval-suites/<suite_id>/draft")
def get_eval_suite_draft(suite_id: str) -> Response[str]:
    return api.reply(200, sampling.get_draft(api.ports(), api.caller(app), suite_id))


@app.post("/host/openwop-serverless/eval-suites/<suite_id>:accept")
def suite_accept(suite_id: str) -> Response[str]:
    from shared.services import suite_accept  # only this verb loads the eval engine

    status, body = suite_accept.accept(api.ports(), api.caller(app), suite_id, api.json_body(app))
    return api.reply(status, body)


lambda_handler = api.make_handler(app)
