"""DESIGN's one-way flow, read from the source (ast): the lower stages import nothing above
them, the passes do not import the runtime (they are given its compilers), and no module of
tf_stitch imports itself back through others, at module level or inside a function."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "tf_stitch"
# Stages in import order: each may import its own and the earlier ones only.
STAGES = ("graph", "fusion", "codegen")


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    path = PACKAGE.parent / name.replace(".", "/")
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _imports(path: Path) -> Iterator[str]:
    """Every tf_stitch module `path` imports, anywhere in it."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name.split(".")[0] == "tf_stitch")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] != "tf_stitch":
                continue
            for alias in node.names:  # `from tf_stitch.x import y`: y may be a module
                full = f"{node.module}.{alias.name}"
                yield full if _is_module(full) else node.module


def _graph() -> dict[str, set[str]]:
    return {_module(p): set(_imports(p)) for p in sorted(PACKAGE.rglob("*.py"))}


def _stage(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_the_lower_stages_import_nothing_above_them() -> None:
    wrong = []
    for module, imported in _graph().items():
        stage = _stage(module)
        if stage not in STAGES:
            continue
        allowed = set(STAGES[: STAGES.index(stage) + 1])
        wrong += [f"{module} -> {d}" for d in sorted(imported) if _stage(d) not in allowed]
    assert not wrong, "imports against the one-way flow:\n" + "\n".join(wrong)


def test_the_passes_do_not_import_the_runtime() -> None:
    wrong = [
        f"{module} -> {d}"
        for module, imported in _graph().items()
        if _stage(module) == "passes"
        for d in sorted(imported)
        if _stage(d) == "runtime"
    ]
    assert not wrong, "\n".join(wrong)


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_module_imports_itself_back() -> None:
    assert _cycles(_graph()) == []


def test_the_cycle_finder_finds_cycles() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _cycles(edges) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
