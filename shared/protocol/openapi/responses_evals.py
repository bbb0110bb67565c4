"""The served document's response schemas of eval suites as a tenant's resource: registration, versions, building
one from runs, accepting an eval's changes (merged into ``responses.RESPONSES``)."""

from __future__ import annotations

from typing import Any

_STR = {"type": "string"}

EVAL_SUITE_RESPONSES: dict[str, dict[str, Any]] = {
    "SuiteRegistration": {
        "type": "object",
        "required": ["suiteId", "version", "evalSuiteRef"],
        "properties": {"suiteId": _STR, "version": _STR, "evalSuiteRef": _STR},
    },
    "SuiteFromRuns": {
        "type": "object",
        "required": ["suiteId", "version", "evalSuiteRef", "taskCount", "addedCount"],
        "properties": {
            "suiteId": _STR,
            "version": _STR,
            "evalSuiteRef": _STR,
            "taskCount": {"type": "integer"},
            "addedCount": {"type": "integer"},
        },
    },
    # docs/decisions/0146-accept-without-invention.md: where each accepted call's answer came from
    "SuiteAccepted": {
        "type": "object",
        "required": ["suiteId", "version", "evalSuiteRef", "taskCount", "acceptedCount", "accepted", "droppedTaskIds"],
        "properties": {
            "suiteId": _STR,
            "version": _STR,
            "evalSuiteRef": _STR,
            "taskCount": {"type": "integer"},
            "acceptedCount": {"type": "integer"},
            "accepted": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["taskId", "calls"],
                    "properties": {
                        "taskId": _STR,
                        "calls": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "required": ["call", "tool", "provenance"],
                                "properties": {
                                    "call": {"type": "integer", "minimum": 0},
                                    "tool": _STR,
                                    "provenance": {"enum": ["recorded", "accepted-live", "reviewer-supplied"]},
                                },
                            },
                        },
                    },
                },
            },
            "droppedTaskIds": {"type": "array", "items": _STR},
        },
    },
    "EvalSuiteAcceptRequest": {
        "type": "object",
        "additionalProperties": False,
        "required": ["runId", "reason"],
        "properties": {
            "runId": _STR,
            "reason": {"type": "string", "minLength": 1, "maxLength": 2000},
            "taskIds": {"type": "array", "minItems": 1, "maxItems": 10000, "items": _STR},
            "answers": {
                "type": "array",
                "minItems": 1,
                "maxItems": 10000,
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["taskId", "call", "response"],
                    "properties": {
                        "taskId": _STR,
                        "call": {"type": "integer", "minimum": 0},
                        "response": {},
                        "isError": {"type": "boolean"},
                    },
                },
            },
            "dropTaskIds": {"type": "array", "minItems": 1, "maxItems": 10000, "items": _STR},
        },
    },
    "EvalSuiteList": {
        "type": "object",
        "required": ["suites"],
        "properties": {
            "suites": {"type": "array", "items": {"$ref": "#/components/schemas/EvalSuiteEntry"}},
            "nextCursor": _STR,
        },
    },
    "EvalSuiteEntry": {
        "type": "object",
        "required": ["suiteId", "versions", "taskCount", "createdAt"],
        "properties": {
            "suiteId": _STR,
            "versions": {"type": "array", "items": _STR},
            "taskCount": {"type": "integer"},
            "createdAt": _STR,
        },
    },
    "EvalSuiteVersions": {
        "type": "object",
        "required": ["suiteId", "versions", "taskCount", "createdAt", "items"],
        "properties": {
            "suiteId": _STR,
            "versions": {"type": "array", "items": _STR},
            "taskCount": {"type": "integer"},
            "createdAt": _STR,
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["version", "evalSuiteRef", "taskCount", "createdAt"],
                    "properties": {
                        "version": _STR,
                        "evalSuiteRef": _STR,
                        "taskCount": {"type": "integer"},
                        "createdAt": _STR,
                    },
                },
            },
        },
    },
}
