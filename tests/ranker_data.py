"""A small corpus the learned ranker learns something from, for the tests that need a model
with trees: per topic, four long documents that repeat the topic (retrieval ranks them
first) and one short document that names it once, the one recorded as right. The boost
alone cannot lift a new topic's short document (no recorded question is near it); the
trees learn "the short one", so their cross-validated figure beats the boost's by far."""

from __future__ import annotations

from typing import Any

TOPICS = [
    "volcano", "piano", "glacier", "submarine", "orchid", "telescope", "saxophone", "cactus",
    "lighthouse", "penguin", "tornado", "violin", "bamboo", "canyon", "dolphin", "espresso",
    "falcon", "harpoon", "igloo", "jellyfish", "kayak", "lantern", "meteor", "nebula",
    "origami", "pyramid", "quartz", "rhubarb", "sapphire", "trombone", "umbrella", "walrus",
]


def question(topic: str) -> str:
    return f"{topic}?"


def right_id(topic: str) -> str:
    return f"{topic}_short"


def docs(tenants: tuple[str, ...] = ("t1", "t2")) -> list[dict[str, Any]]:
    """The corpus as items without vectors: {"id", "title", "text", "metadata"}."""
    out: list[dict[str, Any]] = []
    for n, t in enumerate(TOPICS):
        tenant = {"tenant": tenants[n % len(tenants)]}
        out.append({"id": right_id(t), "title": f"Note {n}",
                    "text": f"Filed under {t}: see the archive index page {n} for scans.",
                    "metadata": tenant})
        for j in range(4):
            out.append({"id": f"{t}_long{j}", "title": f"The {t} {j}",
                        "text": (f"All about the {t}: the {t} explained with {t} history, {t} "
                                 f"facts, the story of a {t}, and more for every fan of it, "
                                 f"part {j} of four, with pictures and many notes."),
                        "metadata": tenant})
    return out


def records() -> list[tuple[str, str]]:
    """(question, right answer id) of every topic."""
    return [(question(t), right_id(t)) for t in TOPICS]
