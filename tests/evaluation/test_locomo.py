"""LoCoMo's loader: turns, sessions, categories, evidence that resolves, the gold answer."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from internal.evaluation import locomo


def test_load_keeps_resolvable_evidence_and_the_answer(tmp_path: Path) -> None:
    conv = {
        "sample_id": "conv-1",
        "conversation": {
            "speaker_a": "Ann", "speaker_b": "Bo",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "I paint."},
                          {"speaker": "Bo", "dia_id": "D1:2", "text": "I swim."}],
        },
        "qa": [
            {"question": "What does Ann do?", "answer": "paints", "evidence": ["D1:1"],
             "category": 4},
            {"question": "How many?", "answer": 2, "evidence": ["D1:1", "D:9"], "category": 1},
            {"question": "Typo only", "answer": "x", "evidence": ["D"], "category": 2},
            {"question": "Unanswerable", "adversarial_answer": "y", "evidence": ["D1:2"],
             "category": 5},
        ],
    }
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([conv]), encoding="utf-8")
    [c] = locomo.load(path)
    assert c.corpus == "locomo_conv_1"
    assert [(t.id, t.session, t.position) for t in c.turns] == [("D1:1", 1, 1), ("D1:2", 1, 2)]
    assert c.turns[0].when == datetime(2023, 5, 8, 13, 56)
    assert [(q.text, q.category, q.evidence, q.answer) for q in c.questions] == [
        ("What does Ann do?", "single-hop", ("D1:1",), "paints"),
        ("How many?", "multi-hop", ("D1:1",), "2"),
    ]
    assert [(q.text, q.category, q.evidence, q.answer) for q in c.adversarial] == [
        ("Unanswerable", "adversarial", ("D1:2",), "y")]
    assert locomo.recall(["D1:2", "D1:1"], ("D1:1",), 1) == 0.0
    assert locomo.recall(["D1:2", "D1:1"], ("D1:1",), 2) == 1.0
