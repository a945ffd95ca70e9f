"""The main() every daemon shares: config, logging, the app, serve until a signal."""

from __future__ import annotations

import sys
from collections.abc import Callable

import structlog
from aiohttp import web

from internal.common import logs
from internal.common.auth import check_exposure
from internal.common.web import run
from internal.config import Config, ConfigError, load_or_exit, redacted

log = structlog.get_logger()


def warn_renamed(cfg: Config) -> None:
    """A warning a renamed key the config still uses, naming the new one."""
    for old, new in cfg.renamed:
        log.warning("config_key_renamed", key=old, use=new)


def serve(service: str, make_app: Callable[[Config], web.Application], section: str) -> int:
    """Load the config (exit 1 naming a bad key), log it without secrets, serve the app.

    `section` names the config section holding the daemon's host and port; make_app may
    raise ConfigError for settings only it can judge (e.g. a wiki_dir that is missing).
    """
    cfg = load_or_exit()
    logs.configure(cfg.log.level, cfg.log.format, service=service)
    log.info("config", config=redacted(cfg))
    warn_renamed(cfg)
    try:
        check_exposure(cfg, section)
        app = make_app(cfg)
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    where = getattr(cfg, section)
    run(app, where.host, where.port)
    return 0
