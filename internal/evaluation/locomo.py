"""LoCoMo (long multi-session conversations): turns as documents, questions with evidence.

The data (CC BY-NC 4.0) is read where it lies (`../shared/data/locomo/`), never copied.
Each conversation's turns become one corpus: id = `dia_id`, text = "Speaker: text",
title = the session and its date, metadata `{session, turn, date, speaker}`. Questions of
categories 1-4 with evidence that resolves to a turn are scored by evidence
Recall@k; evidence ids that resolve to no turn (upstream typos) are skipped. Category 5's
questions (adversarial: a premise the conversation never states, such as another
speaker's deed) are kept apart, in `adversarial`, with the answer they were written to
tempt (answers are scored on them: the right one is a refusal).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from internal.evaluation.beir import Doc

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
ADVERSARIAL = 5


@dataclass(frozen=True)
class Turn:
    id: str
    speaker: str
    text: str
    session: int
    when: datetime

    @property
    def position(self) -> int:
        """The turn's number in its session: "D3:12" -> 12."""
        return int(self.id.rsplit(":", 1)[1])


@dataclass(frozen=True)
class Question:
    text: str
    category: str
    evidence: tuple[str, ...]
    answer: str = ""  # the gold answer: only bench_smart's oracle reference reads it


@dataclass(frozen=True)
class Conversation:
    id: str  # "conv-26"
    turns: list[Turn]
    questions: list[Question]
    adversarial: list[Question] = field(default_factory=list)  # category 5

    @property
    def corpus(self) -> str:
        return "locomo_" + re.sub(r"[^a-z0-9]+", "_", self.id.lower()).strip("_")


def session_time(value: str) -> datetime:
    """'1:56 pm on 8 May, 2023' -> datetime(2023, 5, 8, 13, 56)."""
    return datetime.strptime(" ".join(value.split()), "%I:%M %p on %d %B, %Y")


def load(path: Path) -> list[Conversation]:
    data = json.loads(path.read_text(encoding="utf-8"))
    out: list[Conversation] = []
    for conv in data:
        c = conv["conversation"]
        turns: list[Turn] = []
        n = 1
        while f"session_{n}" in c:
            when = session_time(c[f"session_{n}_date_time"])
            for t in c[f"session_{n}"]:
                turns.append(Turn(t["dia_id"], t["speaker"], t["text"], n, when))
            n += 1
        ids = {t.id for t in turns}
        qs, adversarial = [], []
        for q in conv["qa"]:
            ev = tuple(e for e in q.get("evidence") or [] if e in ids)
            if int(q.get("category", 0)) == ADVERSARIAL:
                adversarial.append(Question(q["question"], "adversarial", ev,
                                            str(q.get("adversarial_answer", ""))))
                continue
            cat = CATEGORIES.get(int(q.get("category", 0)))
            if cat and ev:
                qs.append(Question(q["question"], cat, ev, str(q.get("answer", ""))))
        out.append(Conversation(conv["sample_id"], turns, qs, adversarial))
    return out


def title(t: Turn) -> str:
    return f"session {t.session}, {t.when.strftime('%d %B %Y').lstrip('0')}"


def doc(t: Turn, text: str | None = None, extra: dict[str, object] | None = None) -> Doc:
    """One turn as a document; `text` replaces the turn's words (a normalised index)."""
    meta: dict[str, object] = {"session": t.session, "turn": t.position,
                               "date": t.when.date().isoformat(), "speaker": t.speaker}
    meta.update(extra or {})
    return Doc(id=t.id, title=title(t), text=f"{t.speaker}: {text if text is not None else t.text}",
               metadata=meta)


def recall(ranked_ids: list[str], evidence: tuple[str, ...], k: int) -> float:
    """Share of the evidence turns among the first k ids."""
    top = set(ranked_ids[:k])
    return sum(1 for e in evidence if e in top) / len(evidence)
