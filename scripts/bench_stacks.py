"""Whole stacks for the benchmarks that compare configurations: one `lakehouse up` per
configuration, started with its environment variables set (scripts/bench_load.py
--fairness-only --config, scripts/bench_newcomer.py)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

from bench_gateway import start_stack


def parse_config(text: str) -> tuple[str, dict[str, str]]:
    """"NAME:VAR=VALUE,VAR=VALUE" -> (NAME, the variables)."""
    name, _, assignments = text.partition(":")
    env = dict(a.split("=", 1) for a in assignments.split(",") if a.strip())
    return name.strip(), {k.strip(): v.strip() for k, v in env.items()}


def config_stacks(stacks: contextlib.ExitStack, configs: list[tuple[str, dict[str, str]]],
                  tmp: Path) -> list[str]:
    """A stack for each configuration, started with its variables set and stopped when
    `stacks` closes; their gateways' URLs."""
    gateways = []
    for i, (name, env) in enumerate(configs):
        print(f"== {name}: {' '.join(f'{k}={v}' for k, v in env.items()) or 'the defaults'}",
              flush=True)
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)  # read when the stack starts
        try:
            gateways.append(stacks.enter_context(running_stack(tmp / f"stack{i}")))
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    return gateways


@contextlib.contextmanager
def running_stack(where: Path) -> Iterator[str]:
    """`lakehouse up` on free ports for the block: its gateway's URL."""
    proc, urls = start_stack(where)
    try:
        yield urls["gateway"]
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(120)
        except subprocess.TimeoutExpired:
            proc.kill()
