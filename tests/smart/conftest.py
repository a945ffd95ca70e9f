"""The real English pipeline (spaCy, weights from its PyPI wheel), loaded once."""

from __future__ import annotations

import pytest
from spacy.language import Language

from internal.understanding import nlp


@pytest.fixture(scope="session")
def pipeline() -> Language:
    return nlp.load()
