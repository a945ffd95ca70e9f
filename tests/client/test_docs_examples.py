"""Every ```python block of docs/PYTHON.md and README.md runs, and every command block
(```bash, ```sh, ```console) of README.md and docs/BENCHMARKS.md.

The python blocks of one file run in order in one namespace, the command blocks in order
with bash, as a reader would type them, against the live stack (which holds the corpora
they name) found through LAKEHOUSE_URL and LAKEHOUSE_TOKEN. A block preceded by
`<!-- doc-test: skip (reason) -->` is left out; every such marker must say why.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.client.conftest import Live
from tests.helpers import ROOT

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.M | re.S)
_SKIP = re.compile(r"<!-- doc-test: skip \(.+\) -->\s*$")


@dataclass(frozen=True)
class Block:
    line: int
    code: str


COMMAND_LANGUAGES = ("bash", "sh", "console")


def blocks_of(path: Path, languages: tuple[str, ...]) -> list[Block]:
    """The file's blocks fenced in one of `languages`, with their first line, but those
    marked to skip."""
    text = path.read_text(encoding="utf-8")
    blocks = []
    for m in _FENCE.finditer(text):
        if m.group(1) in languages and not _SKIP.search(text[:m.start()].rstrip() + "\n"):
            blocks.append(Block(text.count("\n", 0, m.start()) + 2, m.group(2)))
    return blocks


def python_blocks(path: Path) -> list[Block]:
    return blocks_of(path, ("python",))


def test_the_extraction_sees_the_blocks_and_the_marker(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text("a\n```python\nx = 1\n```\n<!-- doc-test: skip (no) -->\n```python\n"
                   "y = 2\n```\n```bash\nls\n```\n", encoding="utf-8")
    assert python_blocks(doc) == [Block(3, "x = 1\n")]


@pytest.mark.parametrize("name", ["docs/PYTHON.md", "README.md"])
def test_python_blocks_run(name: str, live: Live, monkeypatch: pytest.MonkeyPatch,
                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("LAKEHOUSE_URL", live.url)
    monkeypatch.setenv("LAKEHOUSE_TOKEN", live.token)
    path = ROOT / name
    blocks = python_blocks(path)
    assert blocks, f"{name}: no python blocks"
    namespace: dict[str, Any] = {"__name__": "__doc_example__"}
    for block in blocks:
        padded = "\n" * (block.line - 1) + block.code  # tracebacks point at the file's lines
        exec(compile(padded, str(path), "exec"), namespace)
    out = capsys.readouterr().out
    if name == "README.md":
        assert out.splitlines()[0].startswith("tickets T-1042 ")


@pytest.mark.parametrize("name", ["README.md", "docs/BENCHMARKS.md"])
def test_command_blocks_run(name: str, live: Live) -> None:
    """A file's command blocks, in order, each with bash -e; exit 0 each."""
    import os
    import subprocess

    env = {**os.environ, "LAKEHOUSE_URL": live.url, "LAKEHOUSE_TOKEN": live.token}
    for block in blocks_of(ROOT / name, COMMAND_LANGUAGES):
        done = subprocess.run(["bash", "-e", "-c", block.code], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, (f"{name}:{block.line}: exit {done.returncode}\n"
                                      f"{block.code}\n{done.stdout[-2000:]}{done.stderr[-2000:]}")


@pytest.mark.parametrize("name", ["README.md", "docs/BENCHMARKS.md", "docs/PYTHON.md"])
def test_every_skip_marker_says_why(name: str) -> None:
    text = (ROOT / name).read_text(encoding="utf-8")
    markers = re.findall(r"<!-- doc-test: skip(.*?)-->", text)
    assert all(re.fullmatch(r" \(.{8,}\) ", m) for m in markers), markers
