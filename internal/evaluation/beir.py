"""BEIR-format data sets: corpus.jsonl, queries.jsonl and qrels/<split>.tsv."""

from __future__ import annotations

import csv
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Doc:
    id: str
    title: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Dataset:
    """One data set with one split's judgments; only judged queries are kept."""

    name: str
    split: str
    docs: list[Doc]
    queries: dict[str, str]  # query id -> text, judged queries only, file order
    qrels: dict[str, dict[str, int]]  # query id -> doc id -> grade


class DatasetError(ValueError):
    """A data set folder that is missing a file or holds a malformed row."""


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise DatasetError(f"{path}: not found")
    rows: list[dict[str, Any]] = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{path}:{lineno}: invalid JSON: {exc}") from None
            if not isinstance(row, dict) or "_id" not in row:
                raise DatasetError(f"{path}:{lineno}: expected an object with _id")
            rows.append(row)
    return rows


def load_qrels(path: Path) -> dict[str, dict[str, int]]:
    """query-id, corpus-id, score rows (a header line is skipped)."""
    if not path.is_file():
        raise DatasetError(f"{path}: not found")
    qrels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8", newline="") as fh:
        for lineno, row in enumerate(csv.reader(fh, delimiter="\t"), 1):
            if not row or (lineno == 1 and row[0] == "query-id"):
                continue
            if len(row) != 3:
                raise DatasetError(f"{path}:{lineno}: expected 3 tab-separated columns")
            qid, did, score = row
            try:
                qrels.setdefault(qid, {})[did] = int(score)
            except ValueError:
                raise DatasetError(f"{path}:{lineno}: score {score!r} is not an integer") from None
    return qrels


def load_queries(folder: str | Path) -> dict[str, str]:
    """Every query of DIR/queries.jsonl (judged or not): id -> text."""
    return {str(row["_id"]): str(row.get("text") or "")
            for row in _read_jsonl(Path(folder) / "queries.jsonl")}


def load(folder: str | Path, split: str) -> Dataset:
    """Read a BEIR folder; the split names qrels/<split>.tsv."""
    root = Path(folder)
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", split):
        raise DatasetError(f"split {split!r}: use letters, digits, '_', '-' or '.'")
    qrels = load_qrels(root / "qrels" / f"{split}.tsv")
    docs = [
        Doc(
            id=str(row["_id"]),
            title=str(row.get("title") or ""),
            text=str(row.get("text") or ""),
            metadata=dict(row.get("metadata") or {}),
        )
        for row in _read_jsonl(root / "corpus.jsonl")
    ]
    queries = {
        str(row["_id"]): str(row.get("text") or "")
        for row in _read_jsonl(root / "queries.jsonl")
        if str(row["_id"]) in qrels
    }
    missing = sorted(set(qrels) - set(queries))
    if missing:
        raise DatasetError(f"qrels/{split}.tsv judges queries absent from queries.jsonl: {missing[:5]}")
    return Dataset(name=root.resolve().name, split=split, docs=docs, queries=queries, qrels=qrels)


def corpus_name(dataset: Dataset) -> str:
    """The vectord corpus that caches this data set: eval_<name> (vectord's name rule)."""
    slug = re.sub(r"[^a-z0-9_]", "_", dataset.name.lower()).strip("_") or "data"
    if not slug[0].isalpha():
        slug = f"d{slug}"
    name = f"eval_{slug}"
    if len(name) > 63:
        digest = hashlib.sha256(slug.encode()).hexdigest()[:8]
        name = f"{name[:54]}_{digest}"
    return name
