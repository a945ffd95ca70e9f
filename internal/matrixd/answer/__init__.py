"""Answers with their sources (POST /v1/matrix/answer): the question answered from the
hits of its search, each statement cited, or honestly not answered.

`prepare` runs the search (the search route's own path: scopes, filters, playbook and
ranker hold) and reads its hits: sentences scored against the question (`_passages`),
the verdict whether they answer it at all (`_judge`). `events` / `complete` write the
answer: extractive by default (the best sentences within the word budget, no model), or
by the configured model (`_generate`: Ollama, OpenAI-compatible) from a prompt of the
question and the numbered passages only (`_prompt`), its markers checked (`_markers`),
its failure falling back to the extractive text. `_stream` frames the events as
server-sent events; `_feedback` records an answer's cited hits.
"""

from internal.matrixd.answer._feedback import record
from internal.matrixd.answer._generate import Chat, open_chat
from internal.matrixd.answer._service import Answering, Prepared, prepare
from internal.matrixd.answer._stream import CONTENT_TYPE, DONE_FRAME, frame
from internal.matrixd.answer._writing import complete, events

__all__ = ["CONTENT_TYPE", "DONE_FRAME", "Answering", "Chat", "Prepared", "complete", "events",
           "frame", "open_chat", "prepare", "record"]
