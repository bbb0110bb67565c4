"""Workflow definitions: validation on load and the graph facts the scheduler needs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from shared.protocol.ids import NAME_ID_RE

TRIGGER_RULES = ("all_success", "any_success", "all_complete", "none_failed", "any_failed")
VARIABLE_TYPES: dict[str, type | tuple[type, ...]] = {
    "string": str,
    "number": (int, float),
    "boolean": bool,
    "object": dict,
    "array": list,
}
# Bounds on a definition (docs/decisions/0010-workflow-validation.md): larger is refused before any graph work.
MAX_NODES = 10_000
MAX_EDGES = 20_000
# The PortValue kinds of workflow-definition.schema.json; `expression` is refused at registration (no grammar).
PORT_VALUE_KINDS = ("static", "variable", "connection", "expression")


class DefinitionError(ValueError):
    """A workflow definition that cannot run; the message names the fault (no user data echoed)."""


class InputsError(ValueError):
    """Run inputs that do not fit the workflow's variables."""


@dataclass(frozen=True)
class Edge:
    id: str
    source: str
    target: str
    rule: str
    back: bool


@dataclass(frozen=True)
class Workflow:
    id: str
    doc: dict[str, Any]
    node_ids: tuple[str, ...]
    nodes: dict[str, dict[str, Any]]
    edges: tuple[Edge, ...]
    entries: tuple[str, ...]
    max_loopback: int
    timeout_ms: int
    out_edges: dict[str, tuple[Edge, ...]] = field(default_factory=dict)
    in_forward: dict[str, tuple[Edge, ...]] = field(default_factory=dict)

    def forward_reachable(self, start: str) -> set[str]:
        seen: set[str] = set()
        stack = [start]
        while stack:
            n = stack.pop()
            for e in self.out_edges.get(n, ()):
                if not e.back and e.target not in seen:
                    seen.add(e.target)
                    stack.append(e.target)
        return seen


_RawEdge = tuple[str, str, str, str]  # (edge id, source, target, trigger rule)


def load_workflow(doc: Any, known_types: set[str]) -> Workflow:
    """Validate a definition; raise ``DefinitionError`` before anything runs."""
    wid, raw_nodes, raw_edges = _check_shape(doc)
    nodes, order = _load_nodes(raw_nodes, known_types)
    pre = _load_edges(raw_edges, nodes)
    max_loop, timeout = _load_settings(doc)
    back_ids = _back_edge_ids(order, pre)
    if back_ids and max_loop < 1:
        raise DefinitionError("definition has a cycle and no settings.maxLoopbackIterations bound")
    edges = tuple(Edge(eid, s, t, r, eid in back_ids) for eid, s, t, r in pre)
    out: dict[str, list[Edge]] = {n: [] for n in order}
    inf: dict[str, list[Edge]] = {n: [] for n in order}
    for e in edges:
        out[e.source].append(e)
        if not e.back:
            inf[e.target].append(e)
    entries = tuple(n for n in order if not inf[n])
    return Workflow(
        id=wid,
        doc=doc,
        node_ids=tuple(order),
        nodes=nodes,
        edges=edges,
        entries=entries,
        max_loopback=max_loop,
        timeout_ms=timeout,
        out_edges={k: tuple(v) for k, v in out.items()},
        in_forward={k: tuple(v) for k, v in inf.items()},
    )


def _check_shape(doc: Any) -> tuple[str, list[Any], list[Any]]:
    """The definition's id, node list and edge list, each of the right type and within its bound."""
    if not isinstance(doc, dict):
        raise DefinitionError("definition must be an object")
    wid = doc.get("id")
    if not isinstance(wid, str) or not NAME_ID_RE.match(wid):
        raise DefinitionError("definition id is missing or malformed")
    raw_nodes = doc.get("nodes")
    if not isinstance(raw_nodes, list) or not raw_nodes:
        raise DefinitionError("definition has no nodes")
    if len(raw_nodes) > MAX_NODES:
        raise DefinitionError(f"definition has more than {MAX_NODES} nodes")
    raw_edges = doc.get("edges") or []
    if not isinstance(raw_edges, list):
        raise DefinitionError("edges must be a list")
    if len(raw_edges) > MAX_EDGES:
        raise DefinitionError(f"definition has more than {MAX_EDGES} edges")
    return wid, raw_nodes, raw_edges


def _load_nodes(raw_nodes: list[Any], known_types: set[str]) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The nodes by id and their ids in definition order."""
    nodes: dict[str, dict[str, Any]] = {}
    order: list[str] = []
    for n in raw_nodes:
        if not isinstance(n, dict) or not isinstance(n.get("id"), str) or not NAME_ID_RE.match(n["id"]):
            raise DefinitionError("a node has a missing or malformed id")
        if n["id"] in nodes:
            raise DefinitionError("duplicate node id")
        if n.get("typeId") not in known_types:
            raise DefinitionError("a node names an unknown typeId")
        for key in ("config", "inputs"):
            if key in n and not isinstance(n[key], dict):
                raise DefinitionError(f"node {key} must be an object")
        nodes[n["id"]] = n
        order.append(n["id"])
    return nodes, order


def _load_edges(raw_edges: list[Any], nodes: dict[str, dict[str, Any]]) -> list[_RawEdge]:
    """The edges in definition order, each between known nodes under a known trigger rule, ids unique."""
    pre: list[_RawEdge] = []
    for e in raw_edges:
        if not isinstance(e, dict):
            raise DefinitionError("an edge is not an object")
        src, tgt = e.get("sourceNodeId"), e.get("targetNodeId")
        if src not in nodes or tgt not in nodes:
            raise DefinitionError("an edge names an unknown node")
        rule = e.get("triggerRule", "all_success")
        if rule not in TRIGGER_RULES:
            raise DefinitionError("an edge has an unknown triggerRule")
        pre.append((str(e.get("id", f"{src}-{tgt}")), str(src), str(tgt), str(rule)))
    if len({p[0] for p in pre}) != len(pre):
        raise DefinitionError("duplicate edge id")
    return pre


def _load_settings(doc: dict[str, Any]) -> tuple[int, int]:
    """``settings.maxLoopbackIterations`` and ``settings.timeout``, both non-negative integers (0 when absent)."""
    settings = doc.get("settings") or {}
    if not isinstance(settings, dict):
        raise DefinitionError("settings must be an object")
    max_loop = settings.get("maxLoopbackIterations", 0)
    timeout = settings.get("timeout", 0)
    if not isinstance(max_loop, int) or max_loop < 0 or not isinstance(timeout, int) or timeout < 0:
        raise DefinitionError("settings.maxLoopbackIterations and settings.timeout must be non-negative integers")
    return max_loop, timeout


def _back_edge_ids(order: list[str], pre: list[_RawEdge]) -> set[str]:
    """The ids of the back edges; every node must be reachable from an entry (a node without incoming edges)."""
    # Back edges: DFS from the nodes without incoming edges, in definition order. Iterative (an explicit stack of
    # (node, next-edge index)), so a 10,000-node chain never meets Python's recursion limit.
    targets = {t for _, _, t, _ in pre}
    roots = [n for n in order if n not in targets]
    if not roots:
        raise DefinitionError("definition has no entry node (every node has an incoming edge)")
    adj: dict[str, list[_RawEdge]] = {n: [] for n in order}
    for edge in pre:
        adj[edge[1]].append(edge)
    back_ids: set[str] = set()
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for r in roots:
        if r not in state:
            _dfs(r, adj, state, back_ids)
    if any(n not in state for n in order):
        raise DefinitionError("definition has nodes no entry node reaches")
    return back_ids


def _dfs(root: str, adj: dict[str, list[_RawEdge]], state: dict[str, int], back_ids: set[str]) -> None:
    """Walk from ``root``, marking nodes in ``state`` and adding the edges that close a cycle to ``back_ids``."""
    state[root] = 1
    stack: list[tuple[str, int]] = [(root, 0)]
    while stack:
        n, i = stack[-1]
        out_edges = adj[n]
        if i == len(out_edges):
            state[n] = 2
            stack.pop()
            continue
        stack[-1] = (n, i + 1)
        eid, _s, t, _r = out_edges[i]
        if state.get(t) == 1:
            back_ids.add(eid)
        elif t not in state:
            state[t] = 1
            stack.append((t, 0))


def bind_inputs(doc: dict[str, Any], inputs: dict[str, Any] | None) -> dict[str, Any]:
    """Bind run inputs to ``variables[]``: defaults applied, required enforced, types checked."""
    inputs = dict(inputs or {})
    variables = doc.get("variables") or []
    bound: dict[str, Any] = {}
    declared = set()
    for v in variables:
        name = v.get("name")
        declared.add(name)
        vtype = v.get("type")
        if name in inputs:
            value = inputs[name]
            py = VARIABLE_TYPES.get(str(vtype))
            if py is not None and (not isinstance(value, py) or (vtype == "number" and isinstance(value, bool))):
                raise InputsError(f"input '{name}' must be a {vtype}")
            bound[name] = value
        elif "defaultValue" in v:
            bound[name] = v["defaultValue"]
        elif v.get("required"):
            raise InputsError(f"input '{name}' is required")
    for k, val in inputs.items():
        if k not in declared:
            bound[k] = val
    return bound


class UnresolvedInputError(ValueError):
    """A required (non-optional) input binding has no value: its variable is unset or its upstream output absent."""


def resolve_node_inputs(node: dict[str, Any], variables: dict[str, Any], outputs: dict[str, Any]) -> dict[str, Any]:
    """Resolve a node's input PortValues (workflow-definition.schema.json ``$defs/PortValue``).

    - ``{type: "static", value}``: the value as written.
    - ``{type: "variable", variableName, optional?}``: the run's bound variable (run input, else ``defaultValue``).
    - ``{type: "connection", nodeId, outputKey, optional?}``: ``outputs[outputKey]`` of the named upstream node's
      latest ``node.completed``.
    An unset variable or an absent output leaves an ``optional`` input out; otherwise ``UnresolvedInputError``.
    ``expression`` never reaches here: registration refuses it. Anything else (stored definitions that predate
    validation) is passed through as written.
    """
    resolved: dict[str, Any] = {}
    for key, binding in (node.get("inputs") or {}).items():
        kind = binding.get("type") if isinstance(binding, dict) else None
        if kind == "static" and "value" in binding:
            resolved[key] = binding["value"]
        elif kind == "variable" and isinstance(binding.get("variableName"), str):
            name = binding["variableName"]
            if name in variables:
                resolved[key] = variables[name]
            elif not binding.get("optional", False):
                raise UnresolvedInputError(f"input '{key}' names a variable the run does not set")
        elif (
            kind == "connection"
            and isinstance(binding.get("nodeId"), str)
            and isinstance(binding.get("outputKey"), str)
        ):
            src = outputs.get(binding["nodeId"])
            if isinstance(src, dict) and binding["outputKey"] in src:
                resolved[key] = src[binding["outputKey"]]
            elif not binding.get("optional", False):
                raise UnresolvedInputError(f"input '{key}' names an upstream output that is absent")
        elif kind == "expression":
            raise UnresolvedInputError(f"input '{key}' is an expression, which this host does not evaluate")
        else:
            resolved[key] = binding
    return resolved


def check_bindings(wf: Workflow) -> list[tuple[str, str, str]]:
    """What registration refuses in node inputs: ``[(nodeId, inputKey, reason)]``, empty when every binding can
    resolve. A connection must name an upstream node (an ancestor over forward edges) other than the node itself;
    expressions are refused (docs/decisions/0013-expressions-refused.md). A variable binding may name an undeclared
    variable: run inputs that no variable declares are bound too (``bind_inputs``)."""
    faults: list[tuple[str, str, str]] = []
    ancestors: dict[str, int] | None = None
    index = {n: i for i, n in enumerate(wf.node_ids)}
    for nid in wf.node_ids:
        for key, b in (wf.nodes[nid].get("inputs") or {}).items():
            kind = b.get("type") if isinstance(b, dict) else None
            if kind == "expression":
                faults.append((nid, key, "expression"))
            elif kind == "connection":
                if ancestors is None:
                    ancestors = _ancestor_sets(wf)
                src = b.get("nodeId")
                pos = index.get(src, -1) if isinstance(src, str) else -1
                if pos < 0 or not (ancestors[nid] >> pos) & 1:
                    faults.append((nid, key, "not-upstream"))
    return faults


def _ancestor_sets(wf: Workflow) -> dict[str, int]:
    """Each node's ancestors over forward edges, as a bit set over definition order (Kahn's order, no recursion)."""
    index = {n: i for i, n in enumerate(wf.node_ids)}
    pending = {n: len(wf.in_forward[n]) for n in wf.node_ids}
    anc = {n: 0 for n in wf.node_ids}
    ready = [n for n in wf.node_ids if pending[n] == 0]
    while ready:
        n = ready.pop()
        mine = anc[n] | (1 << index[n])
        for e in wf.out_edges[n]:
            if e.back:
                continue
            anc[e.target] |= mine
            pending[e.target] -= 1
            if pending[e.target] == 0:
                ready.append(e.target)
    return anc
