"""Shaped results through the Python client and the retrievers, on the live stack."""

from __future__ import annotations

import os
import subprocess
import sys

import msgspec

import lakehouse
from lakehouse.integrations.langchain import LakehouseRetriever as LangChainRetriever
from lakehouse.integrations.llamaindex import LakehouseRetriever as LlamaIndexRetriever
from tests.client.conftest import Live
from tests.helpers import ROOT


def test_client_search_highlights_groups_and_facets(client: lakehouse.Client) -> None:
    both = ["handbook", "tickets"]
    out = client.search("printer jams after the new toner", corpora=both, k=4,
                        highlight={"pre": "[", "post": "]"}, facets=["corpus", "tags"],
                        group_by="metadata.status", diversity=0.2)
    assert out.facets is not None and set(out.facets) == {"corpus", "tags"}
    assert set(out.facets["corpus"]) <= set(both) and out.facets["corpus"]
    first = out.hits[0]
    assert isinstance(first.highlight, dict) and any("[" in f for f in first.highlight["text"])
    statuses = [h.metadata.get("status") for h in out.hits if h.metadata.get("status")]
    assert len(statuses) == len(set(statuses))
    plain = client.search("printer jams after the new toner", corpora=both, k=4)
    assert plain.facets is None and all(h.highlight is msgspec.UNSET for h in plain.hits)


def test_retrievers_put_highlights_into_metadata(client: lakehouse.Client) -> None:
    docs = LangChainRetriever(client=client, corpora=["handbook", "tickets"], k=3,
                              group_by="metadata.status",
                              search_kwargs={"highlight": True}).invoke("printer toner")
    assert docs and all("<mark>" in " ".join(d.metadata["highlight"]["text"])
                        or d.metadata["highlight_kind"]["text"] == "lead" for d in docs)
    assert all("group_key" in d.metadata for d in docs)
    nodes = LlamaIndexRetriever(client, corpora=["handbook"], k=2,
                                search_kwargs={"highlight": True}).retrieve("printer toner")
    assert nodes and all("highlight" in n.node.metadata for n in nodes)


def test_cli_search_shows_passages_and_facets(live: Live) -> None:
    env = {**os.environ, "LAKEHOUSE_TOKEN": live.token}
    out = subprocess.run(
        [sys.executable, "-m", "internal.cli.main", "search", "printer toner", "--url", live.url,
         "--corpora", "handbook,tickets", "--k", "3", "--highlight", "--facets", "corpus,tags",
         "--group-by", "metadata.status", "--diversity", "0.2"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert any(line.startswith("corpus: ") for line in lines), out.stdout
    assert any(line.startswith("  1  ") for line in lines), out.stdout  # hit 1's passages
    assert "<mark>" not in out.stdout and "\x1b" not in out.stdout  # not a TTY: no bold
