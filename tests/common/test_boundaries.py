"""The wire types in internal/api are shared by every daemon and the public client: they
reach no daemon's package, directly or through the internal modules they import (a test
walks the imports in the source). The public client (clients/python) imports nothing of
`internal` at all."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections import deque
from pathlib import Path

from tests.helpers import ROOT

# The packages of the daemons and of the programs built on them.
DAEMONS = ("vectord", "matrixd", "embedd", "syncd", "mcpd", "gateway", "cli", "stack",
           "evaluation", "backup")


def imported_modules(source: str, package: str) -> list[tuple[str, bool]]:
    """The `internal.*` modules a module's source imports, anywhere in it, in order, each
    with whether it is surely a module.

    `from internal.x import y` imports internal.x, and internal.x.y if y is a module of it
    (not surely: y may be a name defined in internal.x). `package` resolves relative imports.
    """
    out: list[tuple[str, bool]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(alias.name, True) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[:len(parts) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            out.append((base, True))
            out += [(f"{base}.{alias.name}", False) for alias in node.names]
    return [(m, sure) for m, sure in out if m == "internal" or m.startswith("internal.")]


def module_file(root: Path, module: str) -> Path | None:
    """The source file of a module under root (a package's __init__.py), or None."""
    path = root.joinpath(*module.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def loaded_with(module: str) -> list[str]:
    """The module and the packages Python runs before it (internal, internal.x, ...)."""
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def daemon_imports(root: Path, start: str) -> list[str]:
    """Each chain of imports from a module of `start` (a package under root) to a daemon's
    package, as "a -> b -> internal.vectord.x"; empty when there is none."""
    first = sorted(p.relative_to(root).with_suffix("").as_posix().replace("/", ".")
                   .removesuffix(".__init__")
                   for p in (root / start.replace(".", "/")).rglob("*.py"))
    chains: set[str] = set()
    seen: set[str] = set()
    queue: deque[tuple[str, tuple[str, ...]]] = deque((m, (m,)) for m in first)
    while queue:
        module, chain = queue.popleft()
        path = module_file(root, module)
        if module in seen or path is None:
            continue
        seen.add(module)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for name, sure in imported_modules(path.read_text(encoding="utf-8"), package):
            if not sure and module_file(root, name) is None:
                continue  # a name defined in the module imported from
            if name.count(".") and name.split(".")[1] in DAEMONS:
                chains.add(" -> ".join((*chain, name)))
            else:
                queue.extend((m, (*chain, m)) for m in loaded_with(name) if m not in seen)
    return sorted(chains)


def test_internal_api_imports_no_daemon() -> None:
    found = daemon_imports(ROOT, "internal.api")
    assert not found, "internal/api reaches a daemon's package:\n" + "\n".join(found)


def test_the_walk_finds_a_detour_and_names_it(tmp_path: Path) -> None:
    for rel, text in {
        "internal/__init__.py": "",
        "internal/api/__init__.py": "",
        "internal/api/shapes.py": "from internal.common import helpers\n",
        "internal/api/fine.py": "import msgspec\nfrom internal.api.shapes import X\n",
        "internal/common/__init__.py": "",
        "internal/common/helpers.py": "def f():\n    from internal.vectord.search.union_merge import g\n",
        "internal/vectord/__init__.py": "",
        "internal/vectord/search/union_merge.py": "",
    }.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text, encoding="utf-8")
    assert daemon_imports(tmp_path, "internal.api") == [
        "internal.api.shapes -> internal.common.helpers -> internal.vectord.search.union_merge"]
    (tmp_path / "internal/common/helpers.py").write_text("", encoding="utf-8")
    assert daemon_imports(tmp_path, "internal.api") == []


# Run in a fresh interpreter: any import of the server's package fails, and afterwards
# none is loaded. The public client and its retrievers are the client distribution alone.
_STANDALONE = """
import sys
from importlib.abc import MetaPathFinder

class NoServer(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "internal" or name.startswith("internal."):
            raise ImportError(f"the client imported the server's {name}")
        return None

sys.meta_path.insert(0, NoServer())
import lakehouse, lakehouse.integrations.langchain, lakehouse.integrations.llamaindex
client = lakehouse.Client("http://127.0.0.1:9")
client.close()
print(sorted(m for m in sys.modules if m == "internal" or m.startswith("internal.")))
"""


def test_the_client_imports_nothing_of_the_server(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", _STANDALONE], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
