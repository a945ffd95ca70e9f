"""The stream's wire form: server-sent events as OpenAI-compatible chat streams them, a
`data:` line of JSON each (its `type` besides, as the event's name), then `data: [DONE]`."""

from __future__ import annotations

import msgspec

from lakehouse.wire.answer import DONE_LINE

CONTENT_TYPE = "text/event-stream"
DONE_FRAME = f"data: {DONE_LINE}\n\n".encode()
_encoder = msgspec.json.Encoder()


def frame(event: msgspec.Struct) -> bytes:
    """One event: `event: <type>` and `data: <json>` (the JSON holds no line break)."""
    kind = type(event).__struct_config__.tag
    return b"event: " + str(kind).encode() + b"\ndata: " + _encoder.encode(event) + b"\n\n"
