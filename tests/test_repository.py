"""The repository keeps its promises: README commands, CI, BUILD and the package layout."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```(?:sh|bash)\n(.*?)```", text, re.S)
    assert block, "README.md must start with a shell block"
    assert text.index(block.group(0)) < text.index("\n## "), "the commands come first"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_readme_begins_with_the_demo_and_test_commands() -> None:
    demo, tests = readme_commands()
    assert demo.endswith("tf-stitch demo")
    assert "pytest" in tests


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert readme_commands()[1] in ci


def test_build_names_every_python_file_and_only_existing_files() -> None:
    build = (ROOT / "BUILD").read_text()
    named = set(re.findall(r'"((?:tf_stitch|tb_plugin|tests|tools|benchmarks)/[^"*]+)"', build))
    tracked = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    sources = {
        p
        for p in tracked
        if p.endswith(".py")
        and p.split("/")[0] in ("tf_stitch", "tb_plugin", "tests", "tools", "benchmarks")
    }
    assert sources - named == set(), "run: python tools/update_build.py"
    missing = {p for p in named if not (ROOT / p).exists()}
    assert missing == set(), "run: python tools/update_build.py"


def test_build_is_what_the_generator_writes() -> None:
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import update_build
    finally:
        sys.path.pop(0)
    assert (ROOT / "BUILD").read_text() == update_build.render(), "run tools/update_build.py"


def test_the_package_exports_only_the_public_api() -> None:
    import tf_stitch

    assert set(tf_stitch.__all__) == {
        "ConversionError",
        "Converter",
        "LaunchReport",
        "OptimizedFunction",
        "Profile",
        "ProfileAnalysis",
        "ProfileError",
        "VariableWriteError",
        "convert_saved_model",
        "count_launches",
        "disable",
        "enable",
        "enabled",
        "explain",
        "function",
        "generated_code",
        "is_enabled",
        "op_library_path",
        "optimize",
        "profile",
        "stitch",
        "unstitch",
    }
