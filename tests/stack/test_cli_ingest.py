"""`lakehouse ingest` reads BEIR lines strictly and skips what vectord already holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from internal.cli.ingest_input import InputError, as_document, plan_ingest, read_jsonl
from internal.cli.main import build_parser
from internal.ingest import Doc
from lakehouse.wire.documents import DocumentIn, document_hash


def test_read_jsonl_beir_lines(tmp_path: Path) -> None:
    f = tmp_path / "c.jsonl"
    f.write_text('{"_id": "1", "title": "T", "text": "one", "metadata": {"y": 2}}\n\n'
                 '{"_id": 2, "text": "two", "tags": ["a"], "language": "german"}\n', encoding="utf-8")
    docs = read_jsonl(f)
    assert [d.id for d in docs] == ["1", "2"]
    assert docs[0].embed_text() == "T\none"
    assert docs[1].metadata == {} and docs[1].tags == ["a"] and docs[1].language == "german"


@pytest.mark.parametrize(("line", "message"), [
    ('{"title": "x", "text": "y"}', "c.jsonl:1: _id: required"),
    ('{"_id": "1"}', "c.jsonl:1: text: required"),
    ('{"_id": "1", "text": "y", "metadata": [1]}', "metadata: expected an object"),
    ("not json", "c.jsonl:1: not JSON"),
])
def test_read_jsonl_names_the_bad_line(tmp_path: Path, line: str, message: str) -> None:
    f = tmp_path / "c.jsonl"
    f.write_text(line + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=message):
        read_jsonl(f)


def test_duplicate_ids_refused(tmp_path: Path) -> None:
    f = tmp_path / "c.jsonl"
    f.write_text('{"_id": "1", "text": "a"}\n{"_id": "1", "text": "b"}\n', encoding="utf-8")
    with pytest.raises(InputError, match="appears twice"):
        read_jsonl(f)


def _doc(i: str, text: str, language: str | None = None) -> DocumentIn:
    return as_document(Doc(i, text, "t", None, {"k": 1}, language))


def test_plan_skips_same_content_only() -> None:
    same, changed, new = _doc("a", "x"), _doc("b", "y"), _doc("c", "z")
    stored = {"a": document_hash(same), "b": document_hash(_doc("b", "old text"))}
    plan = plan_ingest([same, changed, new], stored)
    assert plan.unchanged == 1
    assert [d.id for d in plan.todo] == ["b", "c"]
    # The same text cut another way is another content: it is sent again.
    assert plan_ingest([same], stored, "none").unchanged == 0
    assert plan_ingest([same], stored, "sections", 500).unchanged == 0


def test_plan_compares_the_language_as_sent() -> None:
    doc = _doc("a", "Der Hund schläft im Garten.", "de")
    assert plan_ingest([doc], {"a": document_hash(doc)}).unchanged == 1
    # Another explicit language is another content: it is sent again.
    other = _doc("a", doc.text, "en")
    assert plan_ingest([doc], {"a": document_hash(other)}).unchanged == 0


def test_cli_parses_every_people_command() -> None:
    p = build_parser()
    a = p.parse_args(["search", "q", "--corpora", "a,b", "--mode", "vector", "--k", "3"])
    assert (a.corpora, a.mode, a.k) == ("a,b", "vector", 3)
    a = p.parse_args(["record", "q", "id1", "--corpus", "c", "--score", "0.5"])
    assert (a.answer_id, a.corpus, a.score) == ("id1", "c", 0.5)
    a = p.parse_args(["record", "q", "id1", "--corpus", "c", "--wrong"])
    assert (a.wrong, a.score) == (True, None)
    a = p.parse_args(["playbooks", "list", "--answer-id", "x", "--limit", "5"])
    assert (a.answer_id, a.limit) == ("x", 5)
    a = p.parse_args(["playbooks", "delete", "a" * 64, "b" * 64])
    assert a.playbook_id == ["a" * 64, "b" * 64]
    a = p.parse_args(["ingest", "f.jsonl", "--corpus", "c"])
    assert (a.batch, a.chunking) == (500, "sections")
    assert p.parse_args(["up"]).func.__name__ == "_up"
    assert p.parse_args(["status", "--url", "http://x"]).url == "http://x"


def test_plan_skips_documents_with_nothing_to_embed() -> None:
    # Cranfield 471 and 995 have no title and no text: the eval harness never stored them,
    # and an embedding of "" only ever adds a noise hit.
    plan = plan_ingest([as_document(Doc("e", "  ", None, None, {}, None)), _doc("a", "x")], {})
    assert [d.id for d in plan.empty] == ["e"] and [d.id for d in plan.todo] == ["a"]
