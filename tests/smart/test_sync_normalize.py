"""[sync] normalize: chunks go through matrixd's normalize before they are embedded."""

from __future__ import annotations

import uuid
from pathlib import Path

import aiohttp

from internal.clients.embed import EmbedClient
from internal.clients.matrixd import MatrixdClient
from internal.clients.vectord import VectordClient
from internal.config import Config
from internal.matrixd.server import make_app
from internal.syncd.runner import Syncer, SyncSettings
from tests.helpers import serve, url_of, with_section


async def test_sync_normalize(base_cfg: Config, documents_url: str, embedd_url: str,
                              tmp_path: Path) -> None:
    (tmp_path / "tar.md").write_text("# tar\n\n> Archiving utility for tape archives and "
                                     "compressed tarballs.\n\n- Create an archive: `tar cf x.tar`\n")
    (tmp_path / "ls.md").write_text("# ls\n\n> List directory contents in long format.\n")
    cfg = with_section(base_cfg, "matrixd", vectord_url=documents_url, embedd_url=embedd_url)
    server = await serve(make_app(cfg))
    corpus = f"wiki_{uuid.uuid4().hex[:8]}"
    try:
        async with aiohttp.ClientSession() as s:
            vec = VectordClient(s, documents_url)
            settings = SyncSettings(wiki_dir=tmp_path, corpus=corpus, normalize=True)
            syncer = Syncer(settings, vec, EmbedClient(s, embedd_url),
                            MatrixdClient(s, url_of(server)))
            first = await syncer.run_once()
            assert first.added == 2 and not first.errors, first
            item = await vec.call("GET", f"/v1/vectors/corpora/{corpus}/items/tar.md%230")
            meta = item["metadata"]
            assert "Archiving utility" in meta["original"]
            assert "tape archives" in meta["keywords"].lower() or "archiving" in meta["keywords"].lower()
            # Normalising is deterministic: an unchanged wiki embeds nothing on the rerun.
            again = await syncer.run_once()
            assert again.unchanged == 2 and again.embedded_chunks == 0, again
            await vec.delete_corpus(corpus)
    finally:
        await server.close()
