"""The wire types in internal/api are shared by every daemon and the public client: they
import nothing from a daemon's package (a test walks their imports)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers import ROOT

DAEMONS = ("internal.vectord", "internal.matrixd", "internal.embedd", "internal.syncd",
           "internal.mcpd", "internal.gateway", "internal.cli", "internal.stack",
           "internal.evaluation", "internal.backup")


def imports_of(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import in a source file, relative ones resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base]) if base else ".".join(parts)
            out.append((node.lineno, base))
            out += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return out


def test_internal_api_imports_no_daemon() -> None:
    offending = [f"{path.relative_to(ROOT)}:{line}: {module}"
                 for path in sorted((ROOT / "internal" / "api").glob("*.py"))
                 for line, module in imports_of(path)
                 if module.startswith(DAEMONS)]
    assert not offending, "internal/api must not import a daemon:\n" + "\n".join(offending)


def test_the_walk_sees_absolute_and_relative_imports() -> None:
    found = {m for _, m in imports_of(ROOT / "internal" / "vectord" / "server.py")}
    assert "asyncio" in found and "internal.vectord.federated" in found
