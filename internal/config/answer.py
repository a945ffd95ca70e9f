"""`[answer]`: how POST /v1/matrix/answer writes an answer (matrixd reads it).

With no backend (the default) every answer is extractive: the hits' sentences, cited,
no model needed. With `backend = "ollama"` (its /api/chat) or `"openai"` (any
OpenAI-compatible /v1/chat/completions), a request may have the model write the answer
from the numbered passages (`generator: "model"`, the default once a backend is set);
its failure or a time-out falls back to the extractive answer. The key of an
OpenAI-compatible server is read from the environment variable `api_key_env` names,
never from the file.
"""

from __future__ import annotations

from dataclasses import dataclass

ANSWER_BACKENDS = ("", "ollama", "openai")


@dataclass(frozen=True)
class AnswerConfig:
    backend: str = ""  # "" (extractive only) | ollama | openai
    # ollama: its address (http://127.0.0.1:11434); openai: the base URL, with its path
    # (https://api.openai.com/v1) or without (http://host:port, /v1 is added).
    url: str = ""
    model: str = ""
    api_key_env: str = ""  # the environment variable holding the bearer key (openai)
    timeout_seconds: float = 60.0  # the whole answer from the model
    first_token_seconds: float = 20.0  # the model's first piece of text
    max_tokens: int = 512  # the model's token budget
    temperature: float = 0.0
    max_words: int = 60  # an answer's word budget when the request names none
    context_words: int = 400  # the passages the model is given, in words

    def validate(self) -> None:
        if self.backend not in ANSWER_BACKENDS:
            raise ValueError(f"backend: {self.backend!r}; expected one of "
                             f"{', '.join(repr(b) for b in ANSWER_BACKENDS)}")
        if self.backend and not (self.url and self.model):
            raise ValueError(f"url: backend {self.backend!r} needs url and model")
        if self.timeout_seconds <= 0 or self.first_token_seconds <= 0:
            raise ValueError("timeout_seconds: must be positive (and first_token_seconds)")
        if self.max_tokens < 16:
            raise ValueError("max_tokens: must be >= 16")
        if not 0 <= self.temperature <= 2:
            raise ValueError("temperature: must be in [0, 2]")
        if not 5 <= self.max_words <= 1000:
            raise ValueError("max_words: must be in 5..1000")
        if self.context_words < self.max_words:
            raise ValueError("context_words: must be >= max_words")
