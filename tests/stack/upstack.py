"""`lakehouse up` as a subprocess on free loopback ports with its own PostgreSQL data dir."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from internal.stack.postgres import postmaster_pid
from tests.helpers import ROOT
from tests.stack.ports import free_port


@dataclass
class Stack:
    proc: subprocess.Popen[str]
    url: str
    tmp: Path
    ports: dict[str, int] = field(default_factory=dict)  # section (GATEWAY, VECTORD...) -> port

    @property
    def logs(self) -> Path:
        return self.tmp / "logs"

    def daemon_pid(self, name: str) -> int:
        for child in psutil.Process(self.proc.pid).children():
            try:
                cmdline = " ".join(child.cmdline())
            except psutil.NoSuchProcess:  # a daemon just killed (a zombie until reaped)
                continue
            if f"internal.{name}.server" in cmdline:
                return child.pid
        raise AssertionError(f"no {name} process under lakehouse up")

    def family(self) -> set[int]:
        """Every process of the stack, PostgreSQL's postmaster included."""
        pids = {p.pid for p in psutil.Process(self.proc.pid).children(recursive=True)}
        pg = postmaster_pid(self.tmp / "pg")
        if pg is not None:
            pids.add(pg)
        return pids

    def up_log(self) -> str:
        return (self.tmp / "up.log").read_text()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(120)


def running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def start(prefix: str, env_extra: dict[str, str] | None = None, timeout: float = 400,
          args: tuple[str, ...] = ()) -> Stack:
    """Start the stack and wait for "Lakehouse is up"; fails with the log's tail if not."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    env = {**os.environ, "LAKEHOUSE_VECTORD_DATA_DIR": str(tmp / "pg"),
           "LAKEHOUSE_LOG_FORMAT": "json", "LAKEHOUSE_CONFIG": str(ROOT / "lakehouse.toml")}
    for name in ("LAKEHOUSE_PG_DSN", "LAKEHOUSE_VECTORD_DSN", "LAKEHOUSE_URL", "LAKEHOUSE_TOKEN"):
        env.pop(name, None)
    ports = {section: free_port() for section in ("GATEWAY", "EMBEDD", "VECTORD", "MATRIXD", "SYNC")}
    env.update({f"LAKEHOUSE_{section}_PORT": str(port) for section, port in ports.items()})
    env.update(env_extra or {})
    proc = subprocess.Popen(
        [sys.executable, "-m", "internal.cli.main", "up", "--log-dir", str(tmp / "logs"),
         "--timeout", str(timeout), *args],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=(tmp / "up.log").open("w"), text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("Lakehouse is up: "):
            return Stack(proc, line.split(": ", 1)[1].strip(), tmp, ports)
    proc.kill()
    raise AssertionError(f"lakehouse up never got ready:\n{(tmp / 'up.log').read_text()[-3000:]}")
