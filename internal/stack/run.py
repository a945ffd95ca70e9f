"""`lakehouse up` end to end: PostgreSQL once, the daemons supervised, a clean stop."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import secrets
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import IO, TextIO

import structlog

from internal.common.auth import check_exposure
from internal.config import Config, ConfigError
from internal.pg.embedded import EmbeddedPostgres
from internal.stack import ha_run, postgres
from internal.stack.cluster import Cluster
from internal.stack.pgwatch import PostgresWatch
from internal.stack.plan import plan
from internal.stack.supervisor import Child, Supervisor

log = structlog.get_logger()


def _interrupt(signum: int, _: FrameType | None) -> None:
    raise KeyboardInterrupt(signum)


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _up_or_why(sup: Supervisor, pending: list[str], ready_timeout: float,
               log_dir: Path | None, out: TextIO) -> bool:
    """`Lakehouse is up` and the parts not running (stopped on their configuration), or
    why the stack is not up (False)."""
    stopped = sup.failed()
    if "gateway" in stopped:
        print(f"lakehouse up: the gateway stopped: {stopped['gateway']}", file=sys.stderr)
        return False
    if pending:
        print(f"lakehouse up: not ready after {ready_timeout:g}s: {', '.join(pending)}",
              file=sys.stderr)
        for name in pending:
            if log_dir is not None:
                print(f"--- {name} log:\n{_tail(log_dir / f'{name}.log')}", file=sys.stderr)
        return False
    print(f"Lakehouse is up: {sup.children['gateway'].spec.url}", file=out, flush=True)
    if stopped:
        print(f"(not running: {', '.join(sorted(stopped))}; see above, and `lakehouse "
              "status`)", file=out, flush=True)
    return True


def _said(out: TextIO, event: str, child: Child) -> None:
    """What the terminal shows of a daemon: a line as it comes up; once, why it stopped
    on its configuration (it is not restarted)."""
    if event == "ready":
        pid = child.proc.pid if child.proc else "-"
        print(f"  {child.spec.name:<8} {child.spec.url}  ready (pid {pid})", file=out,
              flush=True)
    elif event == "failed":
        print(f"  {child.spec.name:<8} {child.spec.url}  stopped: {child.failed} "
              "(not restarted: correct the setting, then start again)", file=sys.stderr,
              flush=True)


async def _serve(cfg: Config, dsn: str, config_file: str | None, log_dir: Path | None,
                 ready_timeout: float, out: TextIO, pg: EmbeddedPostgres | None = None,
                 standbys: list[EmbeddedPostgres] | None = None,
                 ha: Cluster | None = None, echo: IO[bytes] | None = None) -> int:
    # With client tokens but no service token, the daemons get a fresh random one for
    # this run, so no client token doubles as the key to the daemons' own ports.
    token = cfg.gateway.service_token or (secrets.token_urlsafe(32) if cfg.gateway.tokens else "")
    standbys = standbys or []
    read_dsns = (*cfg.vectord.read_dsns, *(s.dsn for s in standbys))
    if ha is not None:  # writes to the leader, searches to the standbys (never the leader)
        dsn, read_dsns = ha.dsn, (*read_dsns, *ha.node_dsns)
    specs = plan(cfg, dsn, config_file, token, read_dsns)
    if ha is not None:
        urls = ",".join((*cfg.ha.patroni_urls, *ha.patroni_urls))
        specs = [dataclasses.replace(s, env={**s.env, "LAKEHOUSE_HA_PATRONI_URLS": urls,
                                             "LAKEHOUSE_HA_DATA_DIR": str(ha.folder)})
                 for s in specs]

    sup = Supervisor(specs, log_dir=log_dir, on_event=functools.partial(_said, out), echo=echo,
                     forward=True)
    loop = asyncio.get_running_loop()
    def on_signal(sig: signal.Signals) -> None:
        # Logged here, in the handler itself, so a stop request is visible even if the
        # coroutine waiting for `stopping` were held up elsewhere.
        log.info("signal_received", signal=sig.name, already_stopping=sup.stopping.is_set())
        sup.stopping.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal, sig)
    watches: list[asyncio.Task[None]] = []
    for n, server in enumerate([pg, *standbys] if pg is not None else []):
        watches.append(asyncio.create_task(PostgresWatch(
            functools.partial(postgres.alive, server.data_dir), server.restart, sup.stopping,
            name="postgres" if n == 0 else f"replica-{n}").run()))
    ha_sup: Supervisor | None = None
    try:
        if ha is not None:
            print(f"starting the HA cluster in {ha.folder}: etcd x{len(ha.members)}, "
                  f"Patroni x{len(ha.nodes)}", file=out, flush=True)
            ha_sup, lead = await ha_run.start(ha, log_dir, sup.stopping, ready_timeout,
                                              cfg.ha.synchronous)
            if sup.stopping.is_set():
                return 0
            if lead is None:
                print(f"lakehouse up: the HA cluster has no leader after {ready_timeout:g}s",
                      file=sys.stderr)
                return 1
            print(f"  leader   {lead.name} (127.0.0.1:{lead.port})", file=out, flush=True)
        await sup.start()
        pending = await sup.wait_ready(ready_timeout)
        if sup.stopping.is_set():
            return 0
        if not _up_or_why(sup, pending, ready_timeout, log_dir, out):
            return 1
        gateway = sup.children["gateway"].spec.url
        if log_dir is not None:
            print(f"(the daemons' logs are in {log_dir}/; warnings and errors show here)",
                  file=out, flush=True)
        log.info("stack_ready", gateway=gateway)
        await sup.stopping.wait()
        log.info("stack_stopping")
        return 0
    finally:
        sup.stopping.set()
        await asyncio.gather(*watches, return_exceptions=True)
        await sup.stop()
        if ha_sup is not None:
            await ha_run.stop(ha_sup)
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def up(cfg: Config, *, config_file: str | None = None, log_dir: Path | None = None,
       ready_timeout: float = 180.0, out: TextIO = sys.stdout, replicas: int = 0,
       ha_nodes: int = 0, echo: IO[bytes] | None = None) -> int:
    """Run the stack until SIGINT/SIGTERM; 0 after a clean stop, 1 if it never got ready.
    log_dir: the daemons' logs (else this terminal); echo: a copy of them there too."""
    for section in ("embedd", "vectord", "matrixd", "sync", "gateway"):
        try:
            check_exposure(cfg, section)
        except ConfigError as exc:
            print(str(exc), file=sys.stderr)
            return 1
    if replicas and cfg.vectord.dsn:
        print("--replicas: only with the embedded PostgreSQL; list the standbys of your own "
              "server in [vectord] read_dsns", file=sys.stderr)
        return 1
    ha_nodes = ha_nodes or cfg.ha.nodes
    if ha_nodes and (cfg.vectord.dsn or replicas):
        print("--ha: runs its own PostgreSQL nodes; not with [vectord] dsn or --replicas",
              file=sys.stderr)
        return 1
    ha: Cluster | None = None
    if ha_nodes:
        try:
            ha = ha_run.prepare(cfg, ha_nodes)
        except (ValueError, RuntimeError) as exc:
            print(f"--ha: {exc}", file=sys.stderr)
            return 1
    previous = signal.signal(signal.SIGTERM, _interrupt)
    pg: EmbeddedPostgres | None = None
    standbys: list[EmbeddedPostgres] = []
    try:
        dsn = cfg.vectord.dsn
        if not dsn and ha is None:
            print(f"starting PostgreSQL in {cfg.vectord.data_dir}", file=out, flush=True)
            pg = postgres.start(cfg.vectord.data_dir, cfg.backup.wal_dir)
            dsn = pg.dsn
            for n in range(1, replicas + 1):
                print(f"starting read replica {n} in "
                      f"{postgres.standby_dir(pg.data_dir, n)}", file=out, flush=True)
                standbys.append(postgres.start_standby(pg, n))
        return asyncio.run(_serve(cfg, dsn, config_file, log_dir, ready_timeout, out, pg,
                                  standbys, ha, echo))
    except KeyboardInterrupt:
        return 0
    finally:
        # A second Ctrl-C must not leave PostgreSQL running half-stopped.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for standby in standbys:
            postgres.stop(standby)
        if pg is not None:
            stopped = postgres.stop(pg)
            log.info("postgres_stopped" if stopped else "postgres_left_running",
                     data_dir=str(pg.data_dir))
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        print("Lakehouse stopped", file=out, flush=True)
