"""Every ```python block of docs/PYTHON.md, and the README's "From Python" block, runs.

The blocks of one file run in order in one namespace, as a reader would type them,
against the live stack (which holds the corpora they name) found through
LAKEHOUSE_URL and LAKEHOUSE_TOKEN. A block preceded by
`<!-- doc-test: skip (reason) -->` is left out.
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


def python_blocks(path: Path) -> list[Block]:
    """The file's ```python blocks, with their first line, but those marked to skip."""
    text = path.read_text(encoding="utf-8")
    blocks = []
    for m in _FENCE.finditer(text):
        if m.group(1) == "python" and not _SKIP.search(text[:m.start()].rstrip() + "\n"):
            blocks.append(Block(text.count("\n", 0, m.start()) + 2, m.group(2)))
    return blocks


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
