"""Every JSON Schema the package ships is a valid JSON Schema 2020-12: checked here once, not on each cold start
(the validators that load them build on them as they are)."""

from __future__ import annotations

import json
from importlib import resources

import pytest
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

SCHEMAS = sorted(
    f.name for f in resources.files("shared.protocol.schemas").iterdir() if f.name.endswith(".schema.json")
)


def test_the_package_ships_the_schemas_its_validators_load() -> None:
    assert {"eval-suite.schema.json", "workflow-definition.schema.json", "eval-suite-rule.schema.json"} <= set(SCHEMAS)


@pytest.mark.parametrize("name", SCHEMAS)
def test_each_packaged_schema_is_a_valid_2020_12_schema(name: str) -> None:
    doc = json.loads(resources.files("shared.protocol.schemas").joinpath(name).read_text("utf-8"))
    assert doc.get("$schema", "https://json-schema.org/draft/2020-12/schema").endswith("2020-12/schema")
    Draft202012Validator.check_schema(doc)


def test_the_check_refuses_a_schema_that_is_not_one() -> None:
    with pytest.raises(SchemaError):
        Draft202012Validator.check_schema({"type": "no-such-type"})
