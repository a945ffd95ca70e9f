"""Resource selection wherever a question fans out, through real matrixd, vectord and embedd
in-process (the real model): the matrix search (`explain` shows each corpus's score and
why), smart search and search_auto, with the playbook's boost, and the learned ranker's
order keeping the corpora's weights."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from internal.api.vectord import Item
from internal.clients.embed import EmbedClient
from internal.clients.vectord import VectordClient
from internal.config import Config
from internal.matrixd.ranker.serve import tilt
from internal.matrixd.server import make_app
from internal.vectord.server import make_app as vectord_app
from tests.helpers import serve, url_of, with_section

# Pages as tldr-pages writes them: a Windows corpus (every page says so, as most of
# tldr's do) and a general one, whose pages match "kill a process by its name" better.
WINDOWS = {
    "taskkill": "Terminate a process by its process ID or name on Windows.",
    "tasklist": "Display a list of currently running processes on Windows.",
    "robocopy": "Robust file and folder copy for Windows.",
    "ipconfig": "Display and manage the network configuration of Windows.",
    "setx": "Set persistent environment variables on Windows.",
    "chkdsk": "Check filesystem and volume metadata for errors on Windows.",
    "winget": "Windows Package Manager: install and upgrade applications.",
    "clip": "Copy input content to the Windows clipboard.",
    "sfc": "Scan the integrity of Windows system files.",
    "powercfg": "Configure power settings and manage power schemes on Windows.",
    "reg": "Manage keys and their values in the Windows registry.",
    "shutdown": "Shut down, restart or log off a Windows machine.",
}
GENERAL = {
    "pkill": "Signal processes by name: kill a process by its name.",
    "pidof": "Get the ID of a process using its name.",
    "kill": "Send a signal to a process, usually to stop the process.",
    "tar": "Archiving utility: extract or create tar archives.",
    "grep": "Find patterns in files using regular expressions.",
    "wc": "Count lines, words and bytes of a file.",
    "ssh": "Secure shell: connect to a remote server.",
    "cal": "Display a calendar with the current day highlighted.",
    "diff": "Compare files and directories line by line.",
    "curl": "Transfer data from or to a server over HTTP.",
    "top": "Display dynamic real-time information about running processes.",
    "df": "Display an overview of the filesystem disk space usage.",
    "du": "Disk usage: estimate and summarize file and directory space usage.",
    "find": "Find files or directories under a directory tree, recursively.",
}
QUESTION = "kill a process by its name on windows"


@pytest.fixture(scope="module")
async def stack(base_cfg: Config, embedd_url: str) -> AsyncIterator[tuple[str, str, str]]:
    """(matrixd URL, the Windows corpus, the general one): a vectord of its own that
    embeds the corpora's names through this embedd, as a stack's does."""
    vectord = await serve(vectord_app(with_section(base_cfg, "vectord",
                                                   embedd_url=(embedd_url,))))
    vurl = url_of(vectord)
    cfg = with_section(base_cfg, "matrixd", vectord_url=(vurl,), embedd_url=(embedd_url,),
                       ranker_auto=False, playbook_corpus=f"pb_{uuid.uuid4().hex[:10]}")
    matrix = await serve(make_app(cfg))
    suffix = uuid.uuid4().hex[:8]
    win, gen = f"windows_{suffix}", f"tools_{suffix}"
    async with aiohttp.ClientSession() as s:
        vc, ec = VectordClient(s, vurl), EmbedClient(s, embedd_url)
        for name, pages in ((win, WINDOWS), (gen, GENERAL)):
            e = await ec.embed([f"{t}\n{d}" for t, d in pages.items()])
            await vc.create_corpus(name, e.dim, model=e.model)
            await vc.upsert(name, [Item(id=f"{t}.md", vector=v, title=t, text=d)
                                   for (t, d), v in zip(pages.items(), e.vectors, strict=True)],
                            model=e.model)
        await _profiled(s, vurl, [win, gen])
    yield url_of(matrix), win, gen
    await matrix.close()
    await vectord.close()


async def _profiled(http: aiohttp.ClientSession, vurl: str, names: list[str]) -> None:
    """Wait until vectord's background upkeep has built each corpus's profile."""
    deadline = time.monotonic() + 120
    for name in names:
        while True:
            async with http.get(f"{vurl}/v1/vectors/corpora/{name}/profile") as r:
                out = await r.json()
            if out["current"] and out["documents"] > 0:
                break
            assert time.monotonic() < deadline, out
            await asyncio.sleep(0.3)


async def post(http: aiohttp.ClientSession, url: str, body: Any) -> dict[str, Any]:
    async with http.post(url, json=body) as r:
        out = await r.json()
        assert r.status == 200, out
        return dict(out)


async def test_the_fan_out_ranks_the_corpus_a_question_names_first(
        stack: tuple[str, str, str], http: aiohttp.ClientSession) -> None:
    matrix, win, gen = stack
    ask = {"query_text": QUESTION, "corpora": [gen, win], "k": 3}
    union = await post(http, f"{matrix}/v1/matrix/search", {**ask, "corpus_selection": False})
    assert union["hits"][0]["corpus"] == gen, union["hits"]  # pkill or pidof, not taskkill
    assert all("weight" not in c and "selection" not in c for c in union["corpora"])
    out = await post(http, f"{matrix}/v1/matrix/search", {**ask, "explain": True})
    assert (out["hits"][0]["corpus"], out["hits"][0]["id"]) == (win, "taskkill.md"), out
    rows = {c["corpus"]: c for c in out["corpora"]}
    assert rows[win]["weight"] > 1 and "weight" not in rows[gen]
    assert rows[gen]["selection"] == {"score": 0.0, "weight": 1.0, "evidence": []}
    sources = {e["source"] for e in rows[win]["selection"]["evidence"]}
    assert "name" in sources, rows[win]  # "windows", a word of its name
    assert rows[win]["selection"]["weight"] == rows[win]["weight"]
    # Without `explain` the weight is told, not why.
    out = await post(http, f"{matrix}/v1/matrix/search", ask)
    assert {c["corpus"]: ("weight" in c, "selection" in c) for c in out["corpora"]} == {
        win: (True, False), gen: (False, False)}
    # An explicit weight wins.
    out = await post(http, f"{matrix}/v1/matrix/search",
                     {**ask, "corpus_weights": {win: 1.0, gen: 2.0}, "explain": True})
    assert out["hits"][0]["corpus"] == gen
    rows = {c["corpus"]: c for c in out["corpora"]}
    assert rows[gen]["weight"] == 2.0 and "weight" not in rows[win]
    assert rows[win]["selection"]["weight"] == 1.0 and rows[win]["selection"]["evidence"]


async def test_smart_search_search_auto_and_the_playbook_boost_select_too(
        stack: tuple[str, str, str], http: aiohttp.ClientSession) -> None:
    matrix, win, gen = stack
    ask = {"query_text": QUESTION, "corpora": [gen, win], "k": 3}
    for route in ("smart_search", "search_auto"):
        out = await post(http, f"{matrix}/v1/matrix/{route}", ask)
        assert out["hits"][0]["corpus"] == win, (route, out["hits"])
    # With the playbook on (an answer recorded for another question), the weights hold.
    await post(http, f"{matrix}/v1/matrix/playbooks/record", {
        "query_text": "count the lines of a file", "answer_id": "wc.md",
        "answer_corpus": gen, "score": 1})
    out = await post(http, f"{matrix}/v1/matrix/search", {**ask, "use_playbook": True})
    assert out["hits"][0]["corpus"] == win and out["playbook"]["entries"] == 0, out
    assert {c["corpus"]: "weight" in c for c in out["corpora"]} == {win: True, gen: False}


def test_the_learned_ranker_keeps_a_corpus_weight_on_either_side_of_zero() -> None:
    assert tilt(0.5, 2.0) == 1.0 and tilt(-0.5, 2.0) == -0.25 and tilt(0.0, 2.0) == 0.0
    assert tilt(0.5, 1.0) == 0.5 and tilt(-0.5, 1.0) == -0.5
    # A weight above 1 always raises a key, below 1 always lowers it.
    for key in (-2.0, -0.1, 0.1, 2.0):
        assert tilt(key, 1.5) > key and tilt(key, 0.5) < key
