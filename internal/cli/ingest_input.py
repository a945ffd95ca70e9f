"""What `lakehouse ingest` reads and sends: the JSON lines checked up front, the plan of
what changed, and the texts normalised by matrixd (no I/O but the client's calls)."""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from internal.understanding import context

if TYPE_CHECKING:  # loaded by the command that runs
    from internal.ingest import Doc
    from lakehouse import AsyncClient
    from lakehouse.wire.documents import Chunking, DocumentIn


class InputError(Exception):
    """A problem with the user's file or arguments."""


def read_jsonl(path: Path) -> list[Doc]:
    """BEIR-style lines ({_id, title?, text, metadata?, tags?, language?}), checked up front."""
    from internal.ingest import Doc

    docs: list[Doc] = []
    seen: set[str] = set()
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError as exc:
                raise InputError(f"{path}:{n}: not JSON: {exc}") from None
            if not isinstance(obj, dict):
                raise InputError(f"{path}:{n}: expected a JSON object")
            doc_id = obj.get("_id", obj.get("id"))
            if not isinstance(doc_id, (str, int)) or str(doc_id) == "":
                raise InputError(f"{path}:{n}: _id: required (a string)")
            text = obj.get("text")
            if not isinstance(text, str):
                raise InputError(f"{path}:{n}: text: required (a string)")
            title = obj.get("title") or None
            metadata = obj.get("metadata") or {}
            tags = obj.get("tags")
            language = obj.get("language")
            if not isinstance(metadata, dict):
                raise InputError(f"{path}:{n}: metadata: expected an object")
            if tags is not None and not (isinstance(tags, list) and all(isinstance(t, str) for t in tags)):
                raise InputError(f"{path}:{n}: tags: expected a list of strings")
            if str(doc_id) in seen:
                raise InputError(f"{path}:{n}: _id {doc_id!r} appears twice")
            seen.add(str(doc_id))
            docs.append(Doc(str(doc_id), text, title if isinstance(title, str) else None, tags,
                            metadata, language if isinstance(language, str) else None))
    return docs


@dataclass
class IngestPlan:
    todo: list[DocumentIn] = field(default_factory=list)
    unchanged: int = 0
    empty: list[DocumentIn] = field(default_factory=list)  # no title and no text: nothing to store


def as_document(doc: Doc) -> DocumentIn:
    """A line of the file as the document the stack is sent."""
    from lakehouse.wire.documents import DocumentIn

    return DocumentIn(id=doc.id, text=doc.text, title=doc.title, tags=list(doc.tags or []),
                      metadata=doc.metadata, language=doc.language)


def plan_ingest(docs: list[DocumentIn], stored: dict[str, str], chunking: Chunking = "sections",
                chunk_chars: int = 2000) -> IngestPlan:
    """The documents new or whose stored content hash (the corpus's documents listing)
    differs; those with nothing to store; how many are stored as they are."""
    from internal.ingest.documents import blank
    from lakehouse.wire.documents import document_hash

    plan = IngestPlan()
    for d in docs:
        if blank(d):
            plan.empty.append(d)
        elif stored.get(d.id) == document_hash(d, chunking, chunk_chars):
            plan.unchanged += 1
        else:
            plan.todo.append(d)
    return plan


def _notice(message: str) -> None:
    print(message, file=sys.stderr)


NORMALIZE_BATCH = 500  # observations per /v1/matrix/normalize call (the route takes 1,000)


async def normalized(client: AsyncClient, docs: list[Doc], window: tuple[int, int] = (0, 0),
                     thread: str = "session") -> list[Doc]:
    """Docs whose text is normalised by matrixd; the original and keywords go to metadata.

    metadata "speaker" names who said the text, "reference_time" (or "date", ISO 8601)
    when, so "I" and "yesterday" can be resolved. Normalising is deterministic, so a
    rerun's content hashes match what the first run stored and nothing is re-embedded.
    With a window (before, after), a document whose metadata names its `thread` is indexed
    with the normalised texts of the documents around it in that thread (context.windows).
    """
    from internal.ingest import Doc, retrying

    out: list[Doc] = []
    for i in range(0, len(docs), NORMALIZE_BATCH):
        part = docs[i:i + NORMALIZE_BATCH]
        obs = []
        for d in part:
            o: dict[str, Any] = {"text": d.text}
            when = d.metadata.get("reference_time") or d.metadata.get("date")
            if isinstance(when, str) and when:
                o["reference_time"] = when
            if isinstance(d.metadata.get("speaker"), str):
                o["speaker"] = d.metadata["speaker"]
            obs.append(o)
        res = await retrying(partial(client.normalize, obs), "normalizing", 3, _notice)
        for d, n in zip(part, res.observations, strict=True):
            meta = {**d.metadata, "original": d.text, "keywords": n.keywords}
            if n.dates:
                meta["dates"] = n.dates
            out.append(Doc(d.id, n.text, d.title, d.tags, meta, d.language))
    if window != (0, 0):
        threads = [_thread(d.metadata.get(thread)) for d in out]
        texts = context.windows([d.text for d in out], threads, *window)
        mark = {context.WINDOW_KEY: f"{window[0]}:{window[1]}"}
        out = [d if t == d.text else Doc(d.id, t, d.title, d.tags, {**d.metadata, **mark},
                                         d.language)
               for d, t in zip(out, texts, strict=True)]
    return out


def _thread(value: Any) -> object | None:
    return value if isinstance(value, str | int) and not isinstance(value, bool) else None


def window_arg(value: str) -> tuple[int, int]:
    m = re.fullmatch(r"(\d+):(\d+)", value.strip())
    if not m or int(m[1]) > 10 or int(m[2]) > 10:
        raise argparse.ArgumentTypeError(f"expected BEFORE:AFTER, each 0..10, got {value!r}")
    return int(m[1]), int(m[2])
