"""/readyz of the gateway: every daemon's /readyz, and PostgreSQL as vectord sees it."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

import aiohttp
import msgspec

from internal.api.responses import Component, Ready
from internal.common.upstream import Upstream

_TIMEOUT = aiohttp.ClientTimeout(total=3.0)
State = Literal["ok", "unavailable", "not_ready"]


async def _probe(session: aiohttp.ClientSession, address: str) -> tuple[int, Any]:
    try:
        async with session.get(f"{address}/readyz", timeout=_TIMEOUT) as resp:
            raw = await resp.read()
            try:
                body = msgspec.json.decode(raw) if raw else None
            except msgspec.DecodeError:
                body = raw[:200].decode("utf-8", "replace")
            return resp.status, body
    except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
        return 0, f"unreachable: {exc.__class__.__name__}"


def _postgres_of(vectord_body: Any) -> Any:
    """PostgreSQL's entry in vectord's readyz components, whatever vectord names it."""
    comps = vectord_body.get("components") if isinstance(vectord_body, dict) else None
    if not isinstance(comps, dict):
        return None
    for key in ("postgres", "postgresql", "pg", "database", "db"):
        if key in comps:
            return comps[key]
    return None


def _is_ok(entry: Any) -> bool:
    if isinstance(entry, dict):
        return entry.get("status") in ("ok", True)
    return entry in ("ok", True)


async def check(session: aiohttp.ClientSession, upstreams: dict[str, Upstream],
                bodies: dict[str, Any] | None = None) -> Ready:
    """(all ready, per-component status); an upstream with several addresses is
    ready when one of them is. `bodies`, when given, gets every address's answer."""
    probes = [(name, addr) for name, up in upstreams.items() for addr in up.addresses]
    results = await asyncio.gather(*(_probe(session, addr) for _, addr in probes))
    components: dict[str, Component] = {}
    for (name, addr), (status, body) in zip(probes, results, strict=True):
        if bodies is not None:
            bodies[addr] = body
        state: State = "ok" if status == 200 else ("unavailable" if status == 0 else "not_ready")
        prev = components.get(name)
        if prev is None or (prev.status != "ok" and state == "ok"):
            components[name] = Component(status=state, address=addr, detail=body)
        pg = _postgres_of(body) if name == "vectord" else None
        if pg is not None and ("postgres" not in components or _is_ok(pg)):
            components["postgres"] = Component(status="ok" if _is_ok(pg) else "not_ready",
                                               address=None, detail=pg)
    if "vectord" in upstreams and "postgres" not in components:
        components["postgres"] = Component(status="unavailable", address=None,
                                           detail="unknown: vectord did not report it")
    ready = all(c.status == "ok" for c in components.values())
    return Ready(status="ok" if ready else "degraded", components=components)


def vectord_readyz(ready: Ready) -> Any:
    """vectord's own /readyz answer, as the gateway's readiness holds it (None: none)."""
    vectord = ready.components.get("vectord")
    return None if vectord is None else vectord.detail


def replicas_of(ready: Ready) -> list[dict[str, Any]]:
    """The read replicas vectord reported in its readyz (none: an empty list)."""
    detail = vectord_readyz(ready)
    comps = detail.get("components") if isinstance(detail, dict) else None
    found = comps.get("read_replicas") if isinstance(comps, dict) else None
    return [r for r in found if isinstance(r, dict)] if isinstance(found, list) else []


def embed_lanes_of(body: Any) -> list[dict[str, Any]]:
    """embedd's lanes per model from its /readyz answer (none: an empty list)."""
    found = body.get("lanes") if isinstance(body, dict) else None
    return [m for m in found if isinstance(m, dict)] if isinstance(found, list) else []
