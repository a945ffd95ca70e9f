"""The docs' examples run: every ```python block of docs/PYTHON.md and README.md, and every
command block (```bash, ```sh, ```console) of README.md and docs/BENCHMARKS.md.

Python blocks of one file run in order in one namespace, as a reader would type them;
command blocks run in order, each with bash (`set -e`), from the repository root. Both run
against the live stack (which holds the corpora they name) found through LAKEHOUSE_URL
and LAKEHOUSE_TOKEN. A block preceded by `<!-- doc-test: skip (reason) -->` is left out:
one that starts the stack, runs a benchmark or needs a data set says so there.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import lakehouse
from tests.client.conftest import Live
from tests.helpers import ROOT

# A fence at any indentation (a block inside a list item), closed at the same one.
_FENCE = re.compile(r"^( *)```(\w*)\n(.*?)^\1```[ \t]*$", re.M | re.S)
_SKIP = re.compile(r"<!-- doc-test: skip \(.+\) -->\s*$")
COMMANDS = ("bash", "sh", "console")
# Fences that are neither commands nor Python: printed output and configuration.
NOT_RUN = ("text", "json", "toml")
COMMAND_DOCS = ("README.md", "docs/BENCHMARKS.md")


@dataclass(frozen=True)
class Block:
    line: int  # the file's line of the block's first line of code
    code: str
    language: str = "python"
    skipped: bool = False


def blocks(path: Path, languages: Collection[str], *, with_skipped: bool = False
           ) -> list[Block]:
    """The file's fenced blocks in `languages`, in order, with their first line and their
    code (un-indented); those marked to skip only `with_skipped` (then marked so)."""
    text = path.read_text(encoding="utf-8")
    out = []
    for m in _FENCE.finditer(text):
        indent, language, body = m.group(1), m.group(2), m.group(3)
        if language not in languages:
            continue
        skipped = bool(_SKIP.search(text[:m.start()].rstrip() + "\n"))
        if skipped and not with_skipped:
            continue
        code = "".join(line[len(indent):] if line.startswith(indent) else line
                       for line in body.splitlines(keepends=True))
        out.append(Block(text.count("\n", 0, m.start()) + 2, code, language, skipped))
    return out


def commands_of(block: Block) -> str:
    """The script a command block runs: a ```console block's `$ ` lines (the rest is
    their output), any other block as written."""
    if block.language != "console":
        return block.code
    return "".join(line[2:] for line in block.code.splitlines(keepends=True)
                   if line.startswith("$ "))


def test_the_extraction_sees_the_blocks_and_the_marker(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text("a\n```python\nx = 1\n```\n<!-- doc-test: skip (no) -->\n```python\n"
                   "y = 2\n```\n```bash\nls\n```\n- item:\n\n  ```sh\n  pwd\n  ```\n"
                   "```console\n$ echo hi\nhi\n```\n", encoding="utf-8")
    assert blocks(doc, ("python",)) == [Block(3, "x = 1\n")]
    assert blocks(doc, ("python",), with_skipped=True)[1] == Block(7, "y = 2\n", skipped=True)
    found = blocks(doc, COMMANDS)
    assert found == [Block(10, "ls\n", "bash"), Block(15, "pwd\n", "sh"),
                     Block(18, "$ echo hi\nhi\n", "console")]
    assert commands_of(found[2]) == "echo hi\n"


@pytest.mark.parametrize("name", [*COMMAND_DOCS, "docs/PYTHON.md"])
def test_every_fence_is_run_or_says_why_not(name: str) -> None:
    """A block whose fence names no known language would escape the runs below."""
    text = (ROOT / name).read_text(encoding="utf-8")
    languages = {m.group(2) for m in _FENCE.finditer(text)}
    assert languages <= {"python", *COMMANDS, *NOT_RUN}, f"{name}: fences {sorted(languages)}"


@pytest.mark.parametrize("name", ["docs/PYTHON.md", "README.md"])
def test_python_blocks_run(name: str, live: Live, monkeypatch: pytest.MonkeyPatch,
                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("LAKEHOUSE_URL", live.url)
    monkeypatch.setenv("LAKEHOUSE_TOKEN", live.token)
    path = ROOT / name
    found = blocks(path, ("python",))
    assert found, f"{name}: no python blocks"
    namespace: dict[str, Any] = {"__name__": "__doc_example__"}
    for block in found:
        padded = "\n" * (block.line - 1) + block.code  # tracebacks point at the file's lines
        exec(compile(padded, str(path), "exec"), namespace)
    out = capsys.readouterr().out
    if name == "README.md":
        assert out.splitlines()[0].startswith("tickets T-1042#0 ")


@pytest.fixture(scope="module")
def shell_env(live: Live, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of a command block: the live stack's address and token, and a
    `lakehouse` (also for the docs' `.venv/bin/lakehouse`) that runs this checkout."""
    bin_dir = tmp_path_factory.mktemp("doc-bin")
    launcher = bin_dir / "lakehouse"
    launcher.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m internal.cli.main "$@"\n',
                        encoding="utf-8")
    launcher.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE_")}
    env.update(LAKEHOUSE_URL=live.url, LAKEHOUSE_TOKEN=live.token,
               # The commands' read-your-writes state file, not the user's.
               LAKEHOUSE_STATE_DIR=str(tmp_path_factory.mktemp("doc-state")),
               PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", COLUMNS="80")
    return env


def runnable(code: str, bin_dir: str) -> str:
    """The script with the docs' `.venv/bin/lakehouse` and `.venv/bin/python` replaced by
    the launcher and this interpreter (a worktree has no .venv of its own)."""
    code = re.sub(r"(?<![\w/.-])\.venv/bin/lakehouse\b", f"{bin_dir}/lakehouse", code)
    return re.sub(r"(?<![\w/.-])\.venv/bin/python\b", sys.executable, code)


@pytest.mark.parametrize("name", COMMAND_DOCS)
def test_command_blocks_run(name: str, shell_env: dict[str, str]) -> None:
    path = ROOT / name
    bin_dir = shell_env["PATH"].split(os.pathsep, 1)[0]
    for block in blocks(path, COMMANDS):
        script = runnable(commands_of(block), bin_dir)
        done = subprocess.run(["bash", "-e", "-c", script], cwd=ROOT, env=shell_env,
                              capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, (f"{name}:{block.line}: exit {done.returncode}\n{script}"
                                      f"\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}")
    # Every command block is run above or says why not (BENCHMARKS.md's all take minutes).
    every = blocks(path, COMMANDS, with_skipped=True)
    assert every, f"{name}: no command blocks"


@pytest.mark.parametrize("name", [*COMMAND_DOCS, "docs/PYTHON.md"])
def test_every_skip_marker_says_why(name: str) -> None:
    text = (ROOT / name).read_text(encoding="utf-8")
    markers = re.findall(r"<!-- doc-test: skip(.*?)-->", text)
    assert all(re.fullmatch(r" \(.{8,}\) ", m) for m in markers), markers


def test_the_readmes_tenant_token_filters_on_what_the_tour_stores(live: Live) -> None:
    """The tour's tenant-token example, as written there, with a search key over the tour's
    tickets: its searches find exactly the tickets its filter names."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    call = re.search(r"lakehouse\.tenant_token\(key, (corpora=\[[^\]]*\]), filter=(\{.*?\}\})\)",
                     text.replace("\n", " "))
    assert call, "the README's tenant_token example"
    corpora = ast.literal_eval(call.group(1).removeprefix("corpora="))
    flt = ast.literal_eval(call.group(2))

    with lakehouse.Client(live.url, live.token) as admin:
        key = admin.request("POST", "/v1/keys", body={"name": "readme tenant",
                                                      "actions": ["search"], "corpora": corpora})
        token = lakehouse.tenant_token(key["key"], corpora=corpora, filter=flt)
        with lakehouse.Client(live.url, token) as tenant:
            found = tenant.search("ticket report password printer network", k=20)
        admin.request("DELETE", f"/v1/keys/{key['id']}")
    wanted = flt["metadata"]
    assert found.hits, "the filter matches none of the tour's items"
    assert all(all(h.metadata.get(k) == v for k, v in wanted.items()) for h in found.hits)
    assert {h.corpus for h in found.hits} <= set(corpora)
