"""The house stays readable at a glance: no module of the server or the client past 500
lines, no function past 80, and every folder of Python code under internal/ a package
(with `__init__.py`), so the import contracts see it (a folder without one is invisible
to lint-imports)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers import ROOT

MAX_LINES = 500
MAX_FUNCTION_LINES = 80
TREES = (ROOT / "internal", ROOT / "clients" / "python" / "lakehouse")

def python_files() -> list[Path]:
    return sorted(p for tree in TREES for p in tree.rglob("*.py"))


def test_no_module_passes_500_lines() -> None:
    long = {str(p.relative_to(ROOT)): n for p in python_files()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert python_files() and long == {}


def test_every_folder_of_python_code_is_a_package() -> None:
    folders = {p.parent for p in python_files()}
    missing = sorted(str(f.relative_to(ROOT)) for f in folders if not (f / "__init__.py").is_file())
    assert folders and missing == []


def long_functions() -> dict[str, int]:
    """Every function or method spanning more than MAX_FUNCTION_LINES lines, from its
    `def` to its last line, as `path:name` -> lines."""
    out = {}
    for p in python_files():
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"), str(p))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    out[f"{p.relative_to(ROOT).as_posix()}:{node.name}"] = n
    return out


def test_no_function_passes_80_lines() -> None:
    long = long_functions()
    assert long == {}
