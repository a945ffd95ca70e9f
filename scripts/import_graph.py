"""The import graph's figures (grimp, every import, inside functions too): modules and
imports, import cycles (groups of modules that reach each other), arrows back up (imports
from a layer to one above it, by the layers contract in pyproject.toml) and the largest
modules by lines. `lint-imports` enforces the contracts; this prints where things stand.

    .venv/bin/python scripts/import_graph.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import grimp
import tomllib

ROOT = Path(__file__).resolve().parent.parent
SOURCES = {"internal": ROOT / "internal", "lakehouse": ROOT / "clients" / "python" / "lakehouse"}


def cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected groups of two or more modules (Tarjan)."""
    adj = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    sys.setrecursionlimit(max(10_000, 4 * len(adj)))

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in adj[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for m in sorted(adj):
        if m not in index:
            visit(m)
    return found


def layer_of(module: str, layers: list[list[str]]) -> int | None:
    for i, layer in enumerate(layers):
        if any(module == p or module.startswith(p + ".") for p in layer):
            return i
    return None


def arrows_up(graph: grimp.ImportGraph, layers: list[list[str]]) -> list[str]:
    """Imports from a module of a lower layer (later in the list) to a higher one."""
    out = []
    for m in sorted(graph.modules):
        low = layer_of(m, layers)
        for t in sorted(graph.find_modules_directly_imported_by(m)):
            high = layer_of(t, layers)
            if low is not None and high is not None and high < low:
                out.append(f"{m} -> {t}")
    return out


def module_lines(package: str) -> list[tuple[int, str]]:
    found = []
    for path in SOURCES[package].rglob("*.py"):
        rel = path.relative_to(SOURCES[package]).with_suffix("")
        name = ".".join((package, *rel.parts)).removesuffix(".__init__")
        found.append((len(path.read_text(encoding="utf-8").splitlines()), name))
    return sorted(found, reverse=True)


def main() -> int:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    layers = [[p.strip() for p in layer.split("|")]
              for c in contracts if c["type"] == "layers" for layer in c["layers"]]
    graph = grimp.build_graph(*SOURCES)
    imports = sum(len(graph.find_modules_directly_imported_by(m)) for m in graph.modules)
    print(f"modules {len(graph.modules)}, imports between them {imports}")
    found = cycles(graph)
    print(f"import cycles: {len(found)}")
    for group in found:
        print("  " + " <-> ".join(group))
    up = arrows_up(graph, layers)
    print(f"arrows back up (against the layers contract): {len(up)}")
    for arrow in up:
        print("  " + arrow)
    sizes = module_lines("internal") + module_lines("lakehouse")
    print("largest modules (lines): " + ", ".join(f"{name} {n}" for n, name in
                                                 sorted(sizes, reverse=True)[:5]))
    print(f"modules over 500 lines: {sum(1 for n, _ in sizes if n > 500)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
