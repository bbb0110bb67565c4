"""The synthesized host as one template: the root stack with its nested stacks folded in.

The host is a root stack and nested stacks (docs/decisions/0148-nested-stacks.md). The tests read it as the one
template it was before: every nested stack's resources beside the root's (logical ids are unique across them: each
is its construct path below its own stack), a nested stack's parameter replaced by the value its parent passes, and
a parent's ``Fn::GetAtt [<nested stack>, Outputs.X]`` by the nested output's value. So a value reads the same
wherever its consumer lives: ``{"Ref": "<table>"}`` in a function's environment, whichever stack holds the function.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NESTED_STACK = "AWS::CloudFormation::Stack"


@dataclass(frozen=True)
class Templates:
    """The raw templates by stack name (the root's and each nested stack's) and the folded one."""

    raw: dict[str, dict[str, Any]]  # by construct path: the root stack's, then each nested stack's
    sizes: dict[str, int]  # the template files' bytes, as CDK wrote them (what CloudFormation receives)
    flat: dict[str, Any]
    outputs: dict[str, dict[str, Any]]  # folded output values by the logical id of their nested stack

    def to_json(self) -> dict[str, Any]:
        return self.flat

    def resolve(self, stack: Any, value: Any) -> Any:
        """A token as the folded template spells it (``stack.resolve`` names a nested stack's output where the root
        consumes the value: the output's value instead)."""
        return _fold_value(stack.resolve(value), {}, self.outputs)


def synthesize(stack: Any) -> Templates:
    """Synthesize the app of ``stack`` (once) and fold its nested stacks' templates in."""
    from aws_cdk import NestedStack, Stage

    assembly = Stage.of(stack).synth()  # type: ignore[union-attr]
    directory = Path(assembly.directory)
    root = assembly.get_stack_artifact(stack.artifact_id).template
    nested = [c for c in stack.node.find_all() if isinstance(c, NestedStack)]
    raw = {stack.node.path: root}
    sizes = {stack.node.path: (directory / stack.template_file).stat().st_size}
    children: dict[str, dict[str, Any]] = {}
    for child in nested:
        path = directory / child.template_file
        template = json.loads(path.read_text())
        raw[child.node.path] = template
        sizes[child.node.path] = path.stat().st_size
        children[stack.resolve(child.nested_stack_resource.ref)["Ref"]] = template  # type: ignore[union-attr]
    outputs: dict[str, dict[str, Any]] = {}
    return Templates(raw=raw, sizes=sizes, flat=fold(root, children, outputs), outputs=outputs)


def logical_id(construct: Any) -> str:
    """A construct's logical id, resolved in its own stack (the root may name a nested resource by an output)."""
    from aws_cdk import Stack

    return str(Stack.of(construct).resolve(construct.node.default_child.ref)["Ref"])


def _fold_value(value: Any, params: dict[str, Any], outputs: dict[str, dict[str, Any]]) -> Any:
    if isinstance(value, list):
        return [_fold_value(v, params, outputs) for v in value]
    if not isinstance(value, dict):
        return value
    if set(value) == {"Ref"} and value["Ref"] in params:
        return params[value["Ref"]]
    if set(value) == {"Fn::GetAtt"}:
        target, attribute = value["Fn::GetAtt"]
        if target in outputs and str(attribute).startswith("Outputs."):
            return outputs[target][str(attribute)[len("Outputs.") :]]
    return {k: _fold_value(v, params, outputs) for k, v in value.items()}


def fold(
    root: dict[str, Any], children: dict[str, dict[str, Any]], outputs: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """``root`` with the nested templates (by the logical id of their ``AWS::CloudFormation::Stack``) folded in;
    ``outputs`` receives each nested stack's folded output values."""

    def folded(template: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
        return _fold_value(template, params, outputs)  # type: ignore[no-any-return]

    resources: dict[str, Any] = {}
    # a nested stack's parameters may name another nested stack's outputs: fold the producers first
    pending = {k: r for k, r in root["Resources"].items() if r["Type"] == NESTED_STACK}
    while pending:
        ready = [k for k, r in pending.items() if not (_targets(r) & set(pending))]
        if not ready:
            raise ValueError(f"nested stacks that name each other: {sorted(pending)}")
        for logical_id in ready:
            passed = folded(pending.pop(logical_id)["Properties"].get("Parameters", {}), {})
            child = folded(children[logical_id], passed)
            outputs[logical_id] = {k: o["Value"] for k, o in child.get("Outputs", {}).items()}
            _merge(resources, child["Resources"])
    top = folded(root, {})
    _merge(resources, {k: r for k, r in top["Resources"].items() if r["Type"] != NESTED_STACK})
    return {**top, "Resources": resources}


def _merge(into: dict[str, Any], more: dict[str, Any]) -> None:
    clash = set(into) & set(more)
    if clash:
        raise ValueError(f"logical ids in two stacks: {sorted(clash)}")
    into.update(more)


def _targets(resource: dict[str, Any]) -> set[str]:
    text = json.dumps(resource.get("Properties", {}).get("Parameters", {}))
    return {part.split('"')[0] for part in text.split('"Fn::GetAtt": ["')[1:]}
