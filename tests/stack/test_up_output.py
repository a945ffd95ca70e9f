"""What `lakehouse up` shows a person: one line per part as it comes up; the daemons'
logs in files, in the terminal only when asked (--verbose), their warnings always."""

from __future__ import annotations

import io
from pathlib import Path

import structlog.testing

from internal.cli.main import build_parser
from internal.stack.forward import Said, marked_lines, parse
from internal.stack.plan import ChildSpec
from internal.stack.supervisor import Child, Supervisor
from tests.stack.ports import free_port


def _fake(name: str) -> ChildSpec:
    port = free_port()
    return ChildSpec(name, "tests.stack.fake_daemon", "127.0.0.1", port, {"FAKE_PORT": str(port)})


async def _run(tmp_path: Path, echo: io.BytesIO | None) -> list[str]:
    ready: list[str] = []

    def on_event(event: str, child: Child) -> None:
        if event == "ready":
            ready.append(child.spec.name)

    sup = Supervisor([_fake("alpha"), _fake("beta")], log_dir=tmp_path, on_event=on_event,
                     echo=echo)
    await sup.start()
    try:
        assert await sup.wait_ready(60) == []
    finally:
        await sup.stop()
    return ready


async def test_logs_go_to_files_and_the_terminal_only_when_asked(tmp_path: Path) -> None:
    quiet = tmp_path / "quiet"
    assert sorted(await _run(quiet, None)) == ["alpha", "beta"]
    for name in ("alpha", "beta"):
        assert "fake_daemon_started" in (quiet / f"{name}.log").read_text()

    verbose = tmp_path / "verbose"
    echo = io.BytesIO()
    assert sorted(await _run(verbose, echo)) == ["alpha", "beta"]
    assert echo.getvalue().count(b"fake_daemon_started") == 2
    for name in ("alpha", "beta"):
        assert "fake_daemon_started" in (verbose / f"{name}.log").read_text()


def test_up_logs_to_var_log_by_default() -> None:
    args = build_parser().parse_args(["up"])
    assert (args.log_dir, args.verbose) == ("var/log", False)
    assert build_parser().parse_args(["up", "--verbose"]).verbose is True


async def test_the_daemons_warnings_reach_the_terminal(tmp_path: Path) -> None:
    # `lakehouse up` (forward=True) repeats each daemon's warnings through its own log,
    # which the terminal shows; info lines stay in the files.
    port = free_port()
    spec = ChildSpec("alpha", "tests.stack.fake_daemon", "127.0.0.1", port,
                     {"FAKE_PORT": str(port), "FAKE_WARN": "1"})
    sup = Supervisor([spec], log_dir=tmp_path, forward=True)
    with structlog.testing.capture_logs() as shown:
        await sup.start()
        try:
            assert await sup.wait_ready(60) == []
        finally:
            await sup.stop()
    said = [(e["event"], e["log_level"], e.get("daemon")) for e in shown
            if e.get("daemon") == "alpha" and e["log_level"] != "info"]
    assert said == [("fake_degraded", "warning", "alpha"), ("daemon_output", "warning", "alpha")]
    degraded = next(e for e in shown if e["event"] == "fake_degraded")
    assert degraded["fallback"] == "a scan"
    assert "request" in (tmp_path / "alpha.log").read_text()  # info: in the file only


def test_what_counts_as_a_warning() -> None:
    assert parse(b'{"event":"sync_failed","error":"x","level":"warning"}') == Said(
        "warning", "sync_failed", {"error": "x"})
    assert parse(b'{"event":"request","level":"info"}') is None
    assert parse(b"ERROR:aiohttp.server:Error handling request").level == "error"  # type: ignore[union-attr]
    assert parse(b"/x/y.py:3: DeprecationWarning: old").level == "warning"  # type: ignore[union-attr]
    assert parse(b"\x1b[2m2026\x1b[0m [\x1b[33mwarning \x1b[0m] sync_failed").level == "warning"  # type: ignore[union-attr]
    assert parse(b"fake_daemon_started port=1") is None
    info = b'{"event":"request","level":"info"}\n'
    warning = b'{"event":"x","level":"warning"}'
    assert marked_lines(info * 100) == []
    assert marked_lines(info + warning + b"\n" + info + b"WARNING:a:b") == [warning, b"WARNING:a:b"]
