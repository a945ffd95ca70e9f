"""`lakehouse sync DIR --corpus NAME` through a real gateway (the CLI runs as a process)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import aiohttp

from internal.clients.vectord import VectordClient
from internal.config import Config
from internal.embedd.local import MODEL_ID as MINILM
from internal.gateway.server import make_app as gateway_app
from tests.helpers import ROOT, serve, url_of, with_section
from tests.sync.conftest import expected_pages, stored_ids, stored_pages


async def _cli(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "internal.cli.main", "sync", *args, cwd=ROOT,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), timeout=600)
    return proc.returncode or 0, out.decode(), err.decode()


async def test_cli_sync_through_the_gateway(
        base_cfg: Config, wiki: Path, corpus: str, session: aiohttp.ClientSession,
        vectord_url: str, embedd_url: str) -> None:
    cfg = with_section(base_cfg, "gateway", embedd=(embedd_url,), vectord=(vectord_url,), tokens=())
    gateway = await serve(gateway_app(cfg))
    try:
        url = url_of(gateway)
        # MiniLM asked for: the fixture's languages would choose the multilingual model
        # (tests/sync/test_model_choice.py), at twice the CPU a chunk.
        code, out, err = await _cli(str(wiki), "--corpus", corpus, "--url", url,
                                    "--lang", "pages.de=de", "--json", "--model", MINILM)
        assert code == 0, err
        result = json.loads(out)
        want = expected_pages(wiki)
        assert result["added"] == len(want) and result["errors"] == []
        assert "chunk" in err  # the tqdm progress bar went to stderr
        vectord = VectordClient(session, vectord_url)
        assert stored_pages(await stored_ids(vectord, corpus)) == want
        assert (await vectord.get_item(corpus, "pages.de/common/7z.md#0")).language == "german"

        # A folder of the map that matches no page: the run succeeds, with a warning.
        code, out, err = await _cli(str(wiki), "--corpus", corpus, "--url", url, "--quiet",
                                    "--lang", "pages.de=de", "--lang", "pages.xx=fr")
        assert code == 0, err
        assert out.startswith(f"added 0, updated 0, deleted 0, unchanged {len(want)}")
        assert "warning: languages: folder 'pages.xx' matches no page" in err

        code, _, err = await _cli(str(wiki / "missing"), "--corpus", corpus, "--url", url)
        assert code == 1 and "not a directory" in err
    finally:
        await gateway.close()
