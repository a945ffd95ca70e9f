"""The LangChain and LlamaIndex retrievers, with the real frameworks, on the live stack."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys

import pytest
from langchain_core.documents import Document
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle

import lakehouse
from lakehouse.integrations.langchain import LakehouseRetriever as LangChainRetriever
from lakehouse.integrations.llamaindex import LakehouseRetriever as LlamaIndexRetriever
from tests.helpers import ROOT

QUESTION = "printer jams after new toner"


def _check_first(corpus: str, item_id: str, metadata: dict[str, object]) -> None:
    assert (corpus, item_id) == ("tickets", "T-1042#0")
    assert metadata["corpus"] == "tickets" and metadata["id"] == "T-1042#0"
    assert metadata["rank"] == 1 and isinstance(metadata["score"], float)
    scores = metadata["scores"]
    assert isinstance(scores, dict) and scores["vector"] and scores["lexical"]
    assert metadata["title"] == "Printer on floor 2 jams after toner swap"


def test_langchain_sync(client: lakehouse.Client) -> None:
    retriever = LangChainRetriever(client=client, corpora=["handbook", "tickets"], k=3)
    docs = retriever.invoke(QUESTION)
    assert len(docs) == 3 and all(isinstance(d, Document) for d in docs)
    first = docs[0]
    _check_first(first.metadata["corpus"], first.metadata["id"], first.metadata)
    assert first.id == "tickets/T-1042#0" and "orange sealing tape" in first.page_content


async def test_langchain_async_with_options(client: lakehouse.Client) -> None:
    retriever = LangChainRetriever(client=client, k=5, mode="lexical",
                                   filter={"tags_any": ["network"]},
                                   search_kwargs={"corpora": ["handbook", "tickets"]})
    docs = await retriever.ainvoke("VPN drops at home")
    assert docs and all("network" in d.metadata["tags"] for d in docs)
    assert all(d.metadata["scores"]["vector"] is None for d in docs)  # lexical only


def test_llamaindex_sync(client: lakehouse.Client) -> None:
    retriever = LlamaIndexRetriever(client, corpora=["handbook", "tickets"], k=3)
    nodes = retriever.retrieve(QUESTION)
    assert len(nodes) == 3 and all(isinstance(n, NodeWithScore) for n in nodes)
    first = nodes[0]
    _check_first(first.node.metadata["corpus"], first.node.metadata["id"], first.node.metadata)
    assert first.node.node_id == "tickets/T-1042#0" and first.score == first.node.metadata["score"]
    scores = [n.score for n in nodes if n.score is not None]
    assert len(scores) == 3 and scores == sorted(scores, reverse=True)
    shown = first.node.get_content(MetadataMode.LLM)
    assert "Printer on floor 2" in shown and "lexical" not in shown  # scores stay off the prompt


async def test_llamaindex_async_vector_mode(client: lakehouse.Client) -> None:
    retriever = LlamaIndexRetriever(client, corpora=["tickets"], k=2, mode="vector")
    nodes = await retriever.aretrieve(QueryBundle("VPN disconnects"))
    assert nodes[0].node.metadata["id"] == "T-1043#0"
    assert nodes[0].score == nodes[0].node.metadata["scores"]["vector"]  # no mode score


def test_importing_lakehouse_imports_no_framework() -> None:
    code = ("import sys, lakehouse, lakehouse.integrations; "
            "print(sorted(m for m in sys.modules if m.startswith(('langchain', 'llama_index'))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(("module", "framework", "extra"), [
    ("lakehouse.integrations.langchain", "langchain_core", "./clients/python[langchain]"),
    ("lakehouse.integrations.llamaindex", "llama_index", "./clients/python[llamaindex]"),
])
def test_an_integration_without_its_framework_names_the_extra(
        monkeypatch: pytest.MonkeyPatch, module: str, framework: str, extra: str) -> None:
    for name in [m for m in sys.modules if m == framework or m.startswith(f"{framework}.")]:
        monkeypatch.setitem(sys.modules, name, None)  # None: an import of it fails, as if absent
    monkeypatch.setitem(sys.modules, framework, None)
    monkeypatch.delitem(sys.modules, module)
    with pytest.raises(ImportError, match=re.escape(f"pip install '{extra}'")):
        importlib.import_module(module)
