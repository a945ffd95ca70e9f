"""AsyncClient's documents and tasks: text in, chunked and embedded by the stack
(`/v1/corpora/{name}/documents`), read and deleted by the id you gave, and the tasks
that write them (`/v1/tasks`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import quote

from lakehouse._items import given_as
from lakehouse._transport import Transport
from lakehouse.wire.documents import (
    DEFAULT_CHUNK_CHARS,
    MAX_DOCUMENTS,
    AddDocuments,
    Chunking,
    DocumentIn,
    DocumentRow,
    DocumentsPage,
    StoredDocument,
    Task,
    TaskList,
)

WAIT_POLL = 50.0  # the server holds a `?wait=true` this long at most: ask again after


def _d(corpus: str) -> str:
    return f"/v1/corpora/{quote(corpus, safe='')}/documents"


def as_document(value: DocumentIn | Mapping[str, Any], index: int) -> DocumentIn:
    """The caller's document (a mapping checked into a DocumentIn), `documents[index]`
    named when bad."""
    return given_as(value, DocumentIn, f"documents[{index}]")


class DocumentCalls:
    """Documents and tasks (mixed into AsyncClient)."""

    _http: Transport

    async def add_documents(self, corpus: str,
                            documents: Iterable[DocumentIn | Mapping[str, Any]], *,
                            chunking: Chunking = "sections",
                            chunk_chars: int = DEFAULT_CHUNK_CHARS, model: str | None = None,
                            wait: bool = False, timeout: float | None = None) -> list[Task]:
        """Add (or replace) documents as text: the stack chunks them (a chunk per markdown
        section; `chunking="none"`: one item under the document's id), embeds them with
        the corpus's model and stores them, a task per MAX_DOCUMENTS documents. A corpus
        that does not exist is created for them (with auth on, by an admin key), on
        `model` or else the model for their languages (a corpus on another model than
        `model`: Conflict). Sending the same documents again is safe: what is stored as
        it is is not written again. `wait`: each task followed to its end (at most
        `timeout` seconds)."""
        docs = [as_document(d, i) for i, d in enumerate(documents)]
        tasks = []
        for start in range(0, len(docs), MAX_DOCUMENTS):
            body = AddDocuments(documents=docs[start:start + MAX_DOCUMENTS], chunking=chunking,
                                chunk_chars=chunk_chars, model=model)
            tasks.append(await self._http.call("POST", _d(corpus), Task, body=body,
                                               idempotent=True))
        if wait:
            tasks = [await self.wait_task(t, timeout=timeout) for t in tasks]
        return tasks

    async def get_document(self, corpus: str, document_id: str) -> StoredDocument:
        """A document by the id it was given: its fields, its text (its chunks' texts),
        the ids of its chunks (NotFound if there is none)."""
        return await self._http.call("GET", f"{_d(corpus)}/{quote(document_id, safe='')}",
                                     StoredDocument)

    async def delete_documents(self, corpus: str, ids: Sequence[str], *, wait: bool = False,
                               timeout: float | None = None) -> Task:
        """Delete documents with all their chunks (a task, after the corpus's others)."""
        task = await self._http.call("POST", f"{_d(corpus)}/delete", Task,
                                     body={"ids": list(ids)}, idempotent=True)
        return await self.wait_task(task, timeout=timeout) if wait else task

    async def iter_documents(self, corpus: str, *, prefix: str | None = None,
                             page_size: int = 1000) -> AsyncGenerator[DocumentRow, None]:
        """Every document written as text: id, content hash, chunks, title, in id order."""
        async for page in self._http.pages(_d(corpus), DocumentsPage, prefix=prefix,
                                           page_size=page_size):
            for row in page.documents:
                yield row

    async def task(self, task_id: int) -> Task:
        """A task: its state, counts, errors per document and timings."""
        return await self._http.call("GET", f"/v1/tasks/{int(task_id)}", Task)

    async def tasks(self, *, corpus: str | None = None, state: str | None = None,
                    kind: str | None = None, limit: int = 20,
                    before: int | None = None) -> TaskList:
        """Tasks, newest first (`before`: ids up to it), of the corpora you see."""
        params: dict[str, str | int] = {"limit": limit}
        for key, value in (("corpus", corpus), ("state", state), ("kind", kind),
                           ("from", before)):
            if value is not None:
                params[key] = value
        return await self._http.call("GET", "/v1/tasks", TaskList, params=params)

    async def wait_task(self, task: Task | int, *, timeout: float | None = None) -> Task:
        """The task once it ended (succeeded or failed); TimeoutError after `timeout`."""
        task_id = task if isinstance(task, int) else task.id
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            # The server holds a `?wait=true` up to WAIT_POLL seconds; a shorter wait polls.
            held = left is None or left > WAIT_POLL
            got = await self._http.call("GET", f"/v1/tasks/{task_id}", Task,
                                        params={"wait": "true"} if held else None)
            if got.done:
                return got
            if left is not None and left <= 0:
                raise TimeoutError(f"task {task_id} still {got.state} after {timeout} s")
            if not held:
                await asyncio.sleep(min(0.25, max(0.0, left or 0.0)))
