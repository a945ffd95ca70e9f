"""Every install hint in the code and the docs names this project's own distributions.

The client's distribution is `lakehouse-client` (installed from `./clients/python` until it
is published); a distribution named `lakehouse` on PyPI is an unrelated project, so a
hint saying `pip install 'lakehouse[langchain]'` installs someone else's code.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.helpers import ROOT

# `pip install [flags] TARGET`: the first argument that is not a flag, quotes removed.
HINT = re.compile(r"pip3? install((?:\s+-{1,2}[\w-]+)*)\s+['\"]?([^\s'\"`)]+)")
# Targets that are this project's: the client by path or name, the server's checkout
# (`.`, `-e .`, `.[dev]`), setup.sh's own variable and pip upgrading itself.
OURS = re.compile(r"^(\./clients/python|lakehouse-client|\.|\$target|\"\$target\"|pip)"
                  r"(\[[\w,{}]+\])?$")
# Benchmark-only tools installed into their own virtual environments by the scripts that
# compare against them (bench/peers/chroma.py): never a Lakehouse dependency, never a
# name a user could confuse with ours.
BENCH_TOOLS = re.compile(r"^chromadb(==[\d.]+)?$")
SCANNED = ("README.md", "DECISIONS.md", "docs", "clients/python", "internal", "scripts",
           "cmd", "bench")
SUFFIXES = {".py", ".md", ".sh", ".toml", ".js", ".html", ".txt", ""}


def _files() -> list[Path]:
    out: list[Path] = []
    for name in SCANNED:
        path = ROOT / name
        found = [path] if path.is_file() else sorted(path.rglob("*"))
        out += [p for p in found if p.is_file() and p.suffix in SUFFIXES
                and "egg-info" not in p.parts and "__pycache__" not in p.parts]
    return out


def test_every_install_hint_names_our_own_distribution() -> None:
    files = _files()
    assert len(files) > 100 and ROOT / "README.md" in files
    hints, foreign = 0, []
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        for m in HINT.finditer(text):
            hints += 1
            if not (OURS.match(m.group(2)) or BENCH_TOOLS.match(m.group(2))):
                line = text.count("\n", 0, m.start()) + 1
                foreign.append(f"{path.relative_to(ROOT)}:{line}: {m.group(0)}")
    assert hints >= 8, hints  # the README's, docs/PYTHON.md's, the retrievers' and setup.sh's
    assert not foreign, "install hints naming another distribution:\n" + "\n".join(foreign)


def test_the_pattern_catches_the_hint_that_installs_someone_elses_package() -> None:
    for bad in ("pip install 'lakehouse[langchain]'", "pip install lakehouse",
                'pip install -U "lakehouse[llamaindex]"'):
        m = HINT.search(bad)
        assert m is not None and not OURS.match(m.group(2)), bad
    for good in ("pip install './clients/python[langchain]'", "pip install lakehouse-client",
                 "pip install -q -e ./clients/python", "pip install 'lakehouse-client[llamaindex]'"):
        m = HINT.search(good)
        assert m is not None and OURS.match(m.group(2)), good
