"""A daemon that would listen beyond loopback with auth off refuses to start."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from internal.common.auth import check_exposure, daemon_tokens, is_loopback, service_token
from internal.common.daemon import EXIT_CONFIG
from internal.config import Config, ConfigError
from tests.helpers import ROOT, with_section


def test_loopback_hosts() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.1.2.3")
    assert not is_loopback("example.org") and not is_loopback("")


def test_tokens_a_daemon_accepts() -> None:
    cfg = with_section(Config(), "gateway", tokens=("a", "b"))
    assert daemon_tokens(cfg) == ("a", "b") and service_token(cfg) == "a"
    cfg = with_section(cfg, "gateway", service_token="svc")
    assert daemon_tokens(cfg) == ("a", "b", "svc") and service_token(cfg) == "svc"
    assert daemon_tokens(Config()) == () and service_token(Config()) == ""


def test_exposed_without_tokens_is_a_config_error() -> None:
    open_cfg = with_section(Config(), "vectord", host="0.0.0.0")
    with pytest.raises(ConfigError, match=r"vectord\.host: '0\.0\.0\.0' is not a loopback"):
        check_exposure(open_cfg, "vectord")
    check_exposure(with_section(open_cfg, "gateway", tokens=("t",)), "vectord")
    check_exposure(Config(), "vectord")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("LAKEHOUSE_TOKEN", "LAKEHOUSE_GATEWAY_TOKENS",
                        "LAKEHOUSE_GATEWAY_SERVICE_TOKEN")}
    return {**env, "LAKEHOUSE_CONFIG": str(ROOT / "lakehouse.toml"), **extra}


@pytest.mark.parametrize("daemon", ["vectord", "gateway", "embedd", "matrixd"])
def test_daemon_refuses_to_start_exposed(daemon: str) -> None:
    out = subprocess.run([sys.executable, "-m", f"internal.{daemon}.server"], cwd=ROOT,
                         env=_env(**{f"LAKEHOUSE_{daemon.upper()}_HOST": "0.0.0.0"}),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == EXIT_CONFIG  # a configuration error: `lakehouse up` says it once
    assert f"config error: {daemon}.host: '0.0.0.0' is not a loopback address and no tokens" \
        in out.stderr


def test_lakehouse_up_refuses_to_start_exposed() -> None:
    out = subprocess.run([sys.executable, "-m", "internal.cli.main", "up"], cwd=ROOT,
                         env=_env(LAKEHOUSE_SYNC_HOST="0.0.0.0"),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert "sync.host: '0.0.0.0' is not a loopback address" in out.stderr
    assert "starting PostgreSQL" not in out.stdout
