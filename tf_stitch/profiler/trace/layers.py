"""Which layer an op belongs to: name scopes below the model's, mapped to Keras layer names.

Ops of a Keras model called in a graph are named `<model call scope>/<layer call scope>/...`;
an optimized graph's ops also sit under tf_stitch's import scope and, when the executor inlined
a function call, under `PartitionedCall/`. The layer is the first scope below all of those.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from tf_stitch.graph.callable import IMPORT_SCOPE

OUTSIDE_LAYERS = "(outside layers)"
FRAMEWORK_CALL, FRAMEWORK_RETURN = "(framework: call)", "(framework: return)"
_WRAPPER_SCOPE = re.compile(rf"^((Stateful)?PartitionedCall(_\d+)?|{IMPORT_SCOPE})$")
_KERAS_CALL_SUFFIX = re.compile(r"_\d+$")


def layer_of(node: str, model_scope: str, layer_names: Callable[[str], str] | None) -> str:
    """The layer an op node belongs to: the first name-scope component below `model_scope` (or
    below as much of it as the node's name starts with), mapped to a Keras layer name by
    `layer_names` when given."""
    parts = node.split("/")
    prefix = model_scope.split("/") if model_scope else []
    depth = 0
    while depth < len(prefix) and depth < len(parts) and parts[depth] == prefix[depth]:
        depth += 1
    rest = parts[depth:]
    if len(rest) < 2:
        return OUTSIDE_LAYERS
    return layer_names(rest[0]) if layer_names else rest[0]


def model_scope(nodes: Sequence[str]) -> str:
    """The scope above the layers: the scopes of function calls the executor inlined
    (`PartitionedCall/`) and tf_stitch's import scope, where every scoped node has them, then
    the one scope every scoped node shares below those, if there is one (a Keras model's call
    scope); "" if none."""
    names = [n.split("/") for n in nodes if "/" in n]
    prefix: list[str] = []
    while True:
        heads = {p[len(prefix)] for p in names if len(p) > len(prefix) + 1}
        if len(heads) != 1 or not _WRAPPER_SCOPE.match(next(iter(heads))):
            break
        prefix.append(heads.pop())
        names = [p for p in names if p[: len(prefix)] == prefix]
    heads = {p[len(prefix)] for p in names if len(p) > len(prefix) + 1}
    if len(heads) == 1:
        prefix.append(heads.pop())
    return "/".join(prefix)


def keras_layer_names(model: object) -> Callable[[str], str]:
    """Maps a call scope (`conv1_1`) to its Keras layer's name (`conv1`) for `model`'s layers."""
    names = {getattr(layer, "name", "") for layer in getattr(model, "layers", [])}

    def name(scope: str) -> str:
        if scope in names:
            return scope
        base = _KERAS_CALL_SUFFIX.sub("", scope)
        return base if base in names else scope

    return name
