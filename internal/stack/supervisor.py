"""Runs the daemons as child processes, restarts the ones that die, stops them all.

Children get their own process group, so a Ctrl-C in the terminal reaches only the
supervisor, which then stops them in order (gateway first) and PostgreSQL last.
On Linux each child also asks the kernel for SIGTERM if the supervisor dies.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import aiohttp
import psutil
import structlog
from aiohttp import web

from internal.common import stackdump, waits
from internal.common.daemon import EXIT_CONFIG
from internal.stack import standin
from internal.stack.forward import Follower
from internal.stack.plan import ChildSpec

log = structlog.get_logger()

_PR_SET_PDEATHSIG = 1
# How long a daemon killed after the grace has to log its stacks first (stackdump).
STACK_DUMP_SECONDS = 0.5
# How often the daemons' log files are read for warnings to show (forward=True).
FOLLOW_SECONDS = 0.5


def _die_with_parent() -> None:
    """preexec_fn: SIGTERM this child when the supervisor goes (Linux only)."""
    os.setpgrp()
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _as_user(user: str) -> Callable[[], None]:
    """preexec_fn: as _die_with_parent, then become `user` (PostgreSQL refuses root)."""
    import pwd

    entry = pwd.getpwnam(user)

    def preexec() -> None:
        os.setgid(entry.pw_gid)
        os.setuid(entry.pw_uid)
        _die_with_parent()  # after setuid, which clears the parent-death signal

    return preexec


@dataclass(frozen=True)
class Backoff:
    """Restart delays: first, doubling up to cap; reset after a run of `healthy` seconds."""

    first: float = 0.5
    cap: float = 30.0
    healthy: float = 60.0

    def delay(self, failures: int) -> float:
        return float(min(self.cap, self.first * (2 ** max(0, failures - 1))))


@dataclass
class Child:
    spec: ChildSpec
    proc: asyncio.subprocess.Process | None = None
    restarts: int = 0
    failures: int = 0
    started_at: float = 0.0
    last_exit: int | None = None
    log_file: IO[bytes] | None = None
    pids: set[int] = field(default_factory=set)  # every process it ever had, for the final check
    # Why it stopped for good: a configuration error, said once and never restarted.
    failed: str | None = None
    stand_in: web.AppRunner | None = None


class Supervisor:
    """Starts, watches and stops a set of daemons."""

    def __init__(self, specs: list[ChildSpec], *, log_dir: Path | None = None,
                 backoff: Backoff | None = None, python: str = sys.executable,
                 on_event: Callable[[str, Child], None] | None = None,
                 echo: IO[bytes] | None = None, forward: bool = False) -> None:
        """log_dir: each daemon's output into log_dir/<name>.log (else this process's
        stdout and stderr); echo: with log_dir, a copy of every line there too;
        forward: with log_dir and no echo, the daemons' warnings and errors repeated
        through this process's logger (internal.stack.forward).
        on_event hears "ready", "exited", "restarted" and "failed" (a daemon stopped on
        its configuration: not restarted; a stand-in answers on its port with the reason)."""
        self.children = {s.name: Child(s) for s in specs}
        self.log_dir = log_dir
        self.echo = echo
        self.forward = forward and log_dir is not None and echo is None
        self._followers: list[Follower] = []
        self._follow_task: asyncio.Task[None] | None = None
        self._logs_closing = asyncio.Event()
        self.backoff = backoff or Backoff()
        self.python = python
        self.on_event = on_event
        self.stopping = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    async def _spawn(self, child: Child) -> None:
        env = {**os.environ, **child.spec.env}
        out: int | IO[bytes] | None = None
        if self.log_dir is not None:
            if child.log_file is None:
                self.log_dir.mkdir(parents=True, exist_ok=True)
                path = self.log_dir / f"{child.spec.name}.log"
                child.log_file = path.open("ab")
                if self.forward:
                    self._followers.append(Follower(child.spec.name, path))
            out = child.log_file if self.echo is None else asyncio.subprocess.PIPE
        argv = child.spec.argv or (self.python, "-m", child.spec.module)
        preexec = _as_user(child.spec.user) if child.spec.user else _die_with_parent
        child.proc = await asyncio.create_subprocess_exec(
            *argv, env=env, stdin=asyncio.subprocess.DEVNULL,
            stdout=out, stderr=asyncio.subprocess.STDOUT if out == asyncio.subprocess.PIPE
            else out, preexec_fn=preexec,
        )
        if child.proc.stdout is not None:
            self._tasks.append(asyncio.create_task(self._copy(child, child.proc.stdout)))
        child.pids.add(child.proc.pid)
        child.started_at = time.monotonic()
        log.info("daemon_started", daemon=child.spec.name, pid=child.proc.pid, url=child.spec.url)

    async def _copy(self, child: Child, stream: asyncio.StreamReader) -> None:
        """A daemon's output, line by line, into its log file and the echo."""
        while line := await stream.readline():
            for sink in (child.log_file, self.echo):
                if sink is not None:
                    sink.write(line)
                    sink.flush()

    async def _follow(self) -> None:
        """The daemons' new warnings shown every FOLLOW_SECONDS, and once more at the end."""
        while not await waits.event(self._logs_closing, FOLLOW_SECONDS):
            for follower in self._followers:
                follower.show()
        for follower in self._followers:
            follower.show()
            follower.close()
        self._followers.clear()

    async def _watch(self, child: Child) -> None:
        """Keep one daemon running until the supervisor stops."""
        while True:
            assert child.proc is not None
            code = await child.proc.wait()
            child.last_exit = code
            if self.stopping.is_set():
                return
            if code == EXIT_CONFIG:
                await self._failed(child)
                return
            ran = time.monotonic() - child.started_at
            child.failures = 1 if ran >= self.backoff.healthy else child.failures + 1
            delay = self.backoff.delay(child.failures)
            log.warning("daemon_exited", daemon=child.spec.name, pid=child.proc.pid, code=code,
                        ran_seconds=round(ran, 1), restart_in=delay)
            if self.on_event:
                self.on_event("exited", child)
            await waits.event(self.stopping, delay)
            if self.stopping.is_set():
                return
            await self._spawn(child)
            child.restarts += 1
            # A warning: `lakehouse up` shows a person warnings, and a restart is one.
            log.warning("daemon_restarted", daemon=child.spec.name, pid=child.proc.pid,
                        restarts=child.restarts)
            if self.on_event:
                self.on_event("restarted", child)

    async def _failed(self, child: Child) -> None:
        """A daemon stopped on its configuration: said once (the line it printed), not
        restarted; a stand-in serves the reason on its port."""
        child.failed = self._reason(child)
        log.error("daemon_config_error", daemon=child.spec.name, error=child.failed)
        if self.on_event:
            self.on_event("failed", child)
        try:
            child.stand_in = await standin.start(child.spec.name, child.spec.host,
                                                 child.spec.port, child.failed)
        except OSError as exc:  # the port taken meanwhile: the reason is said anyway
            log.warning("stand_in_failed", daemon=child.spec.name, error=str(exc))

    def _reason(self, child: Child) -> str:
        """The `config error: ...` line the daemon printed (its log's last one)."""
        if self.log_dir is not None:
            path = self.log_dir / f"{child.spec.name}.log"
            try:
                with path.open("rb") as fh:
                    fh.seek(max(0, path.stat().st_size - 65536))
                    tail = fh.read().decode("utf-8", "replace").splitlines()
            except OSError:
                tail = []
            said = [line.strip() for line in tail if line.startswith("config error:")]
            if said:
                return said[-1]
        return f"exited with code {EXIT_CONFIG} (a configuration error: see its output)"

    async def start(self) -> None:
        """Spawn every daemon and begin watching them."""
        for child in self.children.values():
            await self._spawn(child)
            self._tasks.append(asyncio.create_task(self._watch(child)))
        if self.forward:
            self._follow_task = asyncio.create_task(self._follow())

    async def wait_ready(self, timeout: float) -> list[str]:
        """Poll each daemon's /readyz until all answer 200; the names still not ready. A
        daemon stopped on its configuration is not waited for, and a daemon whose only
        parts not ready are such daemons (the gateway) counts as ready."""
        deadline = time.monotonic() + timeout
        pending = dict(self.children)
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2.0)) as session:
            while pending and time.monotonic() < deadline and not self.stopping.is_set():
                for name, child in list(pending.items()):
                    if child.failed is not None:
                        del pending[name]
                    elif await self._ready(session, child):
                        log.info("daemon_ready", daemon=name, url=child.spec.url)
                        del pending[name]
                        if self.on_event:
                            self.on_event("ready", child)
                if pending:
                    await waits.event(self.stopping, 0.25)
        return list(pending)

    def failed(self) -> dict[str, str]:
        """The daemons stopped on their configuration, and why."""
        return {n: c.failed for n, c in self.children.items() if c.failed is not None}

    async def _ready(self, session: aiohttp.ClientSession, child: Child) -> bool:
        with contextlib.suppress(aiohttp.ClientError, asyncio.TimeoutError, ValueError):
            async with session.get(f"{child.spec.url}{child.spec.ready_path}") as resp:
                if resp.status == 200:
                    return True
                body = await resp.json(content_type=None)
                parts = body.get("components") if isinstance(body, dict) else None
                if isinstance(parts, dict) and parts:
                    down = {k for k, v in parts.items()
                            if not (isinstance(v, dict) and v.get("status") == "ok")}
                    stopped = set(self.failed())
                    if "vectord" in stopped:  # the gateway hears of PostgreSQL through it
                        stopped.add("postgres")
                    return bool(down) and down <= stopped
        return False

    async def stop(self, grace: float = 15.0) -> None:
        """SIGTERM every daemon (gateway first), SIGKILL what is left after `grace`."""
        self.stopping.set()
        procs: list[psutil.Process] = []
        for child in reversed(list(self.children.values())):
            proc = child.proc
            if proc is None or proc.returncode is not None:
                continue
            with contextlib.suppress(psutil.NoSuchProcess):
                parent = psutil.Process(proc.pid)
                family = [parent, *parent.children(recursive=True)]
                child.pids.update(p.pid for p in family)
                procs.extend(family)
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            log.info("daemon_stopping", daemon=child.spec.name, pid=proc.pid)
        waits = [c.proc.wait() for c in self.children.values() if c.proc is not None]
        try:
            await asyncio.wait_for(asyncio.gather(*waits), grace)
        except asyncio.TimeoutError:
            stuck = [(c.spec.name, c.proc) for c in self.children.values()
                     if c.proc is not None and c.proc.returncode is None]
            log.warning("daemons_killed_after_grace", grace=grace,
                        daemons=[name for name, _ in stuck])
            for _, proc in stuck:  # each logs where it hangs, then dies
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(stackdump.SIGNAL)
            await asyncio.sleep(STACK_DUMP_SECONDS)
        # Whatever is left (a stuck daemon, or a worker it spawned) is killed.
        _, alive = await asyncio.to_thread(psutil.wait_procs, procs, 0.1)
        for p in alive:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()
        if alive:
            await asyncio.to_thread(psutil.wait_procs, alive, 5.0)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for child in self.children.values():
            if child.stand_in is not None:
                await child.stand_in.cleanup()
                child.stand_in = None
        if self._follow_task is not None:  # what the daemons said while stopping shows too
            self._logs_closing.set()
            await self._follow_task
            self._follow_task = None
        for child in self.children.values():
            if child.log_file is not None:
                child.log_file.close()
                child.log_file = None
        log.info("daemons_stopped")
