"""The model's prompt: the question and the numbered passages, nothing else (no I/O).

The instructions are fixed text; the only data in the prompt are the question and the
passages the caller may read (each with its item's title, which dates a conversation's
turn), numbered as the answer's markers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

SYSTEM = (
    "You answer a question using only the numbered passages you are given. After each "
    "statement, cite the passages it rests on by their numbers in square brackets, like "
    "[1] or [2][3]. Use nothing you know besides the passages. If the passages do not "
    "answer the question, say that they do not, in one sentence. Answer in at most "
    "{max_words} words."
)


@dataclass(frozen=True)
class Numbered:
    marker: int
    title: str | None
    text: str


@dataclass(frozen=True)
class Message:
    role: str  # system | user
    content: str


def build(question: str, passages: Sequence[Numbered], max_words: int) -> list[Message]:
    """The system instructions and the user's message: the question, then the passages."""
    lines = [f"Question: {question}", "", "Passages:"]
    for p in passages:
        head = f"[{p.marker}] "
        if p.title:
            head += f"({p.title}) "
        lines.append(head + " ".join(p.text.split()))
    return [Message("system", SYSTEM.format(max_words=max_words)),
            Message("user", "\n".join(lines))]
