"""The eval operations (host extensions): eval reports and runs, and eval suites as a tenant's resource."""

from __future__ import annotations

from shared.protocol.openapi.operation import READ_ERRORS, Op

EVAL_RUNS: tuple[Op, ...] = (
    Op(
        "GET",
        "/host/openwop-serverless/runs/{runId}/eval-report",
        "getEvalReport",
        "get_eval_report",
        {200: "Object"},
        (*READ_ERRORS, 409),
        query=("limit", "cursor"),
    ),
    Op(
        "GET",
        "/host/openwop-serverless/eval-runs",
        "listEvalRuns",
        "get_eval_report",
        {200: "Object"},
        (400, 401, 406),
        query=("suite", "agent", "name", "status", "limit", "cursor"),
    ),
)

# Registering an eval suite, and eval suites as a tenant's resource (issue 24): list, read, delete a version, build
# one from recorded runs, sampling rules, the draft.
EVAL_SUITES: tuple[Op, ...] = (
    Op(
        "POST",
        "/host/openwop-serverless/eval-suites",
        "putEvalSuite",
        "put_eval_suite",
        {200: "SuiteRegistration", 201: "SuiteRegistration"},
        (400, 401, 406, 409, 413, 415),
        body="EvalSuite",
        registration=True,
    ),
    Op(
        "GET",
        "/host/openwop-serverless/eval-suites",
        "listEvalSuites",
        "manage_eval_suites",
        {200: "EvalSuiteList"},
        (400, 401, 406),
        query=("limit", "cursor"),
    ),
    Op(
        "GET",
        "/host/openwop-serverless/eval-suites/{suiteId}",
        "getEvalSuite",
        "manage_eval_suites",
        {200: "EvalSuiteVersions"},
        (401, 404, 406),
    ),
    Op(
        "POST",
        "/host/openwop-serverless/eval-suites/{suiteId}:from-runs",
        "evalSuiteFromRuns",
        "manage_eval_suites",
        {201: "SuiteFromRuns"},
        (400, 401, 404, 406, 409, 413, 415),
        body="EvalSuiteFromRunsRequest",
        registration=True,
    ),
    Op(
        "POST",
        "/host/openwop-serverless/eval-suites/{suiteId}:publish",
        "publishEvalSuiteDraft",
        "manage_eval_suites",
        {201: "SuiteFromRuns"},
        (400, 401, 406, 409, 413, 415),
        body="EvalSuitePublishRequest",
        registration=True,
    ),
    Op(
        "POST",
        "/host/openwop-serverless/eval-suites/{suiteId}:accept",
        "evalSuiteAccept",
        "manage_eval_suites",
        {201: "SuiteAccepted"},
        (400, 401, 406, 409, 413, 415),
        body="EvalSuiteAcceptRequest",
        registration=True,
    ),
    Op(
        "GET",
        "/host/openwop-serverless/eval-suites/{suiteId}/rules",
        "listEvalSuiteRules",
        "manage_eval_suites",
        {200: "Object"},
        (401, 404, 406),
    ),
    Op(
        "POST",
        "/host/openwop-serverless/eval-suites/{suiteId}/rules",
        "createEvalSuiteRule",
        "manage_eval_suites",
        {201: "Object"},
        (400, 401, 406, 413, 415),
        body="EvalSuiteRuleRequest",
        registration=True,
    ),
    Op(
        "DELETE",
        "/host/openwop-serverless/eval-suites/{suiteId}/rules/{ruleId}",
        "deleteEvalSuiteRule",
        "manage_eval_suites",
        {204: None},
        (401, 404, 406),
    ),
    Op(
        "GET",
        "/host/openwop-serverless/eval-suites/{suiteId}/draft",
        "getEvalSuiteDraft",
        "manage_eval_suites",
        {200: "Object"},
        (401, 404, 406),
    ),
    Op(
        "GET",
        "/host/openwop-serverless/eval-suites/{suiteId}/versions/{version}",
        "getEvalSuiteVersion",
        "manage_eval_suites",
        {200: "Object"},
        (401, 404, 406),
    ),
    Op(
        "DELETE",
        "/host/openwop-serverless/eval-suites/{suiteId}/versions/{version}",
        "deleteEvalSuiteVersion",
        "manage_eval_suites",
        {204: None},
        (401, 404, 406, 409),
    ),
)
