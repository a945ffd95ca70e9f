"""Stacks and daemons of a checkout, started on free loopback ports with data of their own.

A Stack is `lakehouse up` of a checkout (this one, or a baseline beside it), run with that
checkout's own interpreter (its .venv, else this one), its PostgreSQL in a data directory
of its own; a Daemon is one daemon of a checkout, for the benchmarks that measure a
daemon alone. Both are stopped by their context managers (SIGTERM, then SIGKILL)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]
SECTIONS = ("GATEWAY", "EMBEDD", "VECTORD", "MATRIXD", "SYNC", "MCPD")
SECTION = {"gateway": "GATEWAY", "embedd": "EMBEDD", "vectord": "VECTORD", "matrixd": "MATRIXD",
           "syncd": "SYNC", "mcpd": "MCPD"}  # daemon -> its LAKEHOUSE_<section>_PORT
# Variables of the caller's shell that would point a stack at someone else's server.
FOREIGN = ("LAKEHOUSE_PG_DSN", "LAKEHOUSE_VECTORD_DSN", "LAKEHOUSE_URL", "LAKEHOUSE_TOKEN")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def python_of(root: Path) -> str:
    """The checkout's own interpreter (its .venv: its own dependencies), else this one."""
    own = root / ".venv" / "bin" / "python"
    return str(own) if own.is_file() else sys.executable


def environment(root: Path, env: Mapping[str, str] | None = None) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k not in FOREIGN}
    out.update({"LAKEHOUSE_LOG_FORMAT": "json", "LAKEHOUSE_CONFIG": str(root / "lakehouse.toml")})
    out.update(env or {})
    return out


def stop(proc: subprocess.Popen[str] | subprocess.Popen[bytes], sig: int = signal.SIGTERM,
         wait: float = 120) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(wait)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)


@dataclass
class Stack:
    """`lakehouse up` of the checkout at root, its files under `where`."""

    root: Path
    where: Path
    gateway: str
    proc: subprocess.Popen[str] | None = None
    ports: dict[str, int] = field(default_factory=dict)

    def url(self, daemon: str) -> str:
        """A daemon's own URL (matrixd, vectord, embedd, ...), past the gateway."""
        return f"http://127.0.0.1:{self.ports[SECTION[daemon]]}"

    @property
    def data_dir(self) -> Path:
        return self.where / "pg"

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres:@/postgres?host={self.data_dir}"

    def processes(self) -> list[psutil.Process]:
        """The daemons and the PostgreSQL server of the stack (it detaches from `up`)
        with its backends."""
        procs = psutil.Process(self.proc.pid).children(recursive=True) if self.proc else []
        for p in psutil.process_iter(["cmdline"]):
            cmd = p.info["cmdline"] or []
            if "-D" in cmd and cmd[cmd.index("-D") + 1:][:1] == [str(self.data_dir)]:
                procs += [p, *p.children()]
        return procs

    def daemon(self, name: str) -> psutil.Process:
        assert self.proc is not None, "a stack given by --url has no processes here"
        for child in psutil.Process(self.proc.pid).children():
            with contextlib.suppress(psutil.NoSuchProcess):
                if f"internal.{name}.server" in " ".join(child.cmdline()):
                    return child
        raise SystemExit(f"no {name} under lakehouse up")


def start(root: Path, where: Path, env: Mapping[str, str] | None = None,
          args: Sequence[str] = (), timeout: float = 600) -> Stack:
    """`lakehouse up` of root on free ports, waited for until it says it is up."""
    where.mkdir(parents=True, exist_ok=True)
    ports = {s: free_port() for s in SECTIONS}
    full = environment(root, {"LAKEHOUSE_VECTORD_DATA_DIR": str(where / "pg"),
                              "LAKEHOUSE_LOG_LEVEL": "warning",
                              **{f"LAKEHOUSE_{s}_PORT": str(p) for s, p in ports.items()},
                              **(env or {})})
    log = (where / "up.log").open("w")
    proc = subprocess.Popen([python_of(root), "-m", "internal.cli.main", "up", "--log-dir",
                             str(where / "logs"), "--timeout", str(int(timeout)), *args],
                            cwd=root, env=full, stdout=subprocess.PIPE, stderr=log, text=True,
                            start_new_session=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("Lakehouse is up: "):
            return Stack(root, where, line.split(": ", 1)[1].strip(), proc, ports)
    proc.kill()
    tail = (where / "up.log").read_text()[-3000:]
    raise SystemExit(f"lakehouse up of {root} did not come up:\n{tail}")


@contextlib.contextmanager
def running(root: Path, where: Path, env: Mapping[str, str] | None = None,
            args: Sequence[str] = ()) -> Iterator[Stack]:
    stack = start(root, where, env, args)
    try:
        yield stack
    finally:
        assert stack.proc is not None
        stop(stack.proc)


@dataclass
class Daemon:
    """One daemon (`internal.<name>.server`) of a checkout, on a free port."""

    name: str
    base: str
    proc: subprocess.Popen[bytes]


def ready(base: str, proc: subprocess.Popen[bytes], path: str, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{base}: the daemon exited with {proc.returncode}")
        with contextlib.suppress(OSError):
            with urllib.request.urlopen(base + path, timeout=5) as r:
                if r.status == 200:
                    return
        time.sleep(0.1)
    raise SystemExit(f"{base}{path}: not ready after {timeout:.0f} s")


@contextlib.contextmanager
def daemon(name: str, env: Mapping[str, str], root: Path = ROOT, path: str = "/healthz"
           ) -> Iterator[Daemon]:
    """The daemon of root on a free port (its port variable set here), ready for the block."""
    port = free_port()
    full = environment(root, {f"LAKEHOUSE_{SECTION[name]}_PORT": str(port),
                              "PYTHONPATH": str(root), **env})
    proc = subprocess.Popen([python_of(root), "-m", f"internal.{name}.server"], cwd=root,
                            env=full, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        ready(base, proc, path)
        yield Daemon(name, base, proc)
    finally:
        stop(proc, wait=60)


async def cli(gateway: str, *args: str, root: Path = ROOT) -> float:
    """`lakehouse ARGS` of the checkout at root against the gateway; its wall seconds."""
    env = environment(root, {"LAKEHOUSE_URL": gateway})
    t0 = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        python_of(root), "-m", "internal.cli.main", *args, cwd=root, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out, _ = await proc.communicate()
    took = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"lakehouse {' '.join(args)} failed ({proc.returncode}):\n"
                         f"{out.decode()[-2000:]}")
    return took


def parse_config(text: str) -> tuple[str, dict[str, str]]:
    """"NAME:VAR=VALUE,VAR=VALUE" -> (NAME, the variables)."""
    name, _, assignments = text.partition(":")
    pairs = (x.split("=", 1) for x in assignments.split(",") if x.strip())
    return name.strip(), {k.strip(): v.strip() for k, v in pairs}
