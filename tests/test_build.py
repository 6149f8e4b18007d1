"""BUILD, as Bazel reads it: one target per module whose deps are its imports, no cycle among
them, every py_test running pytest on its file, and the offline workspace complete.
`bazel build //...` itself runs in CI (.ci/run), which installs Debian's Bazel."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _rules() -> dict[str, tuple[str, str]]:
    """name -> (rule, body) of every target in BUILD."""
    text = (ROOT / "BUILD").read_text()
    rules = {}
    for m in re.finditer(r"^(\w+)\(\n(.*?)^\)", text, re.M | re.S):
        name = re.search(r'^\s*name = "([^"]+)"', m.group(2), re.M)
        if name:
            rules[name.group(1)] = (m.group(1), m.group(2))
    return rules


def _deps(body: str) -> set[str]:
    block = re.search(r"deps = \[(.*?)\]", body, re.S)
    return set(re.findall(r'"(?://)?:([^"]+)"', block.group(1))) if block else set()


def test_every_module_is_one_library_and_the_targets_have_no_cycle() -> None:
    rules = _rules()
    modules = sorted(p for top in ("tf_stitch", "tb_plugin") for p in (ROOT / top).rglob("*.py"))
    srcs = {
        re.search(r'srcs = \["([^"]+)"\]', body).group(1)  # type: ignore[union-attr]
        for rule, body in rules.values()
        if rule == "py_library" and 'srcs = ["' in body
    }
    assert {p.relative_to(ROOT).as_posix() for p in modules} == srcs
    graph = {name: _deps(body) & set(rules) for name, (_, body) in rules.items()}
    missing = {d for name, (_, body) in rules.items() for d in _deps(body)} - set(rules)
    assert missing == set()
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for d in sorted(graph[node]):
            assert state.get(d) != 1, "cycle: " + " -> ".join([*path, node, d])
            if d not in state:
                visit(d, [*path, node])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [])


def test_a_library_depends_on_what_its_module_imports() -> None:
    rules = _rules()
    _, build = rules["tf_stitch_codegen_build"]
    assert {"tf_stitch_codegen_lower", "tf_stitch_fusion_planner", "tf_stitch_graph_names"} <= (
        _deps(build)
    )
    _, guards = rules["tf_stitch_graph_guards"]
    assert _deps(guards) == {"tf_stitch_graph_ir"}  # the graph stage imports nothing above it
    _, codegen = rules["tf_stitch_codegen"]
    assert 'data = [":tf_stitch_codegen_files"]' in codegen  # the headers its emitters include


def test_every_py_test_runs_pytest_on_its_file() -> None:
    tests = {n: body for n, (rule, body) in _rules().items() if rule == "py_test"}
    assert len(tests) == len(list((ROOT / "tests").rglob("test_*.py")))
    for name, body in tests.items():
        (arg,) = re.findall(r'args = \["([^"]+)"\]', body)
        assert name == arg.removesuffix(".py").replace("/", "_")
        assert 'main = "tests/pytest_main.py"' in body and '"pyproject.toml"' in body


def test_the_workspace_names_only_repositories_it_has() -> None:
    workspace = (ROOT / "WORKSPACE").read_text()
    paths = re.findall(r'path = "([^"]+)"', workspace)
    assert paths and all((ROOT / p / "WORKSPACE").is_file() for p in paths)
    ignored = (ROOT / ".bazelignore").read_text().split()
    assert set(paths) <= set(ignored) and ".venv" in ignored
    assert (
        "register_toolchains" in workspace and (ROOT / "third_party/tf/tf_configure.bzl").exists()
    )
    assert "--symlink_prefix=/" in (ROOT / ".bazelrc").read_text()  # no bazel-* in the checkout
