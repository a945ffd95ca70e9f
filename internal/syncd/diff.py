"""The sync plan: what to embed, upsert and delete to make a corpus equal a directory.

No I/O. Inputs are the directory scan (page path -> {chunk id: content hash}) and the
corpus's `/ids` listing (chunk id -> content hash). Safety rule: a page is deleted only
when its file is really gone; a page whose file could not be read, or that lies under
a folder that could not be listed, keeps its chunks.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from internal.syncd.pages import page_of


@dataclass
class SyncPlan:
    added: list[str] = field(default_factory=list)      # pages with no stored chunk
    changed: list[str] = field(default_factory=list)    # pages with new, changed or stale chunks
    unchanged: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)    # pages whose files are gone
    kept: list[str] = field(default_factory=list)       # unreadable now: stored chunks kept
    # page -> chunk ids whose stored hash differs or is missing (to embed and upsert)
    embed: dict[str, list[str]] = field(default_factory=dict)
    # page -> stored chunk ids that no longer exist (to delete once the page is written)
    stale: dict[str, list[str]] = field(default_factory=dict)


def _under(path: str, folders: Collection[str]) -> bool:
    return any(f in ("", ".") or path == f or path.startswith(f.rstrip("/") + "/")
               for f in folders)


def plan(desired: Mapping[str, Mapping[str, str]], stored: Mapping[str, str],
         unreadable: Collection[str] = (), unlisted: Collection[str] = ()) -> SyncPlan:
    """Compare the directory with the corpus, page by page and chunk by chunk.

    unreadable: page paths that exist but could not be read; unlisted: folders whose
    listing failed (pages under them may exist). Stored ids not of the form `path#n`
    were not made by the sync and are left alone.
    """
    stored_by_page: dict[str, dict[str, str]] = {}
    for chunk_id, digest in stored.items():
        page = page_of(chunk_id)
        if page is not None:
            stored_by_page.setdefault(page, {})[chunk_id] = digest
    out = SyncPlan()
    for page in sorted(desired):
        want = desired[page]
        have = stored_by_page.get(page, {})
        to_embed = [cid for cid, digest in want.items() if have.get(cid) != digest]
        stale = sorted(cid for cid in have if cid not in want)
        if not have:
            out.added.append(page)
        elif to_embed or stale:
            out.changed.append(page)
        else:
            out.unchanged.append(page)
        if to_embed:
            out.embed[page] = to_embed
        if stale:
            out.stale[page] = stale
    for page in sorted(stored_by_page):
        if page in desired:
            continue
        if page in unreadable or _under(page, unlisted):
            out.kept.append(page)
            continue
        out.deleted.append(page)
        out.stale[page] = sorted(stored_by_page[page])
    return out
