"""The main() every daemon shares: config, logging, the app, serve until a signal."""

from __future__ import annotations

import sys
from collections.abc import Callable

import structlog
from aiohttp import web

from internal.common import logs
from internal.common.auth import check_exposure
from internal.common.web import run
from internal.config import Config, ConfigError, load, redacted

log = structlog.get_logger()


def warn_renamed(cfg: Config) -> None:
    """A warning a renamed key the config still uses, naming the new one."""
    for old, new in cfg.renamed:
        log.warning("config_key_renamed", key=old, use=new)


# sysexits.h's EX_CONFIG: the daemon stopped on its configuration, which another start
# would meet again; `lakehouse up` does not restart it (internal/stack/supervisor.py).
EXIT_CONFIG = 78


def serve(service: str, make_app: Callable[[Config], web.Application], section: str) -> int:
    """Load the config, build the app, log the config (secrets removed), serve it.

    A configuration error (a bad key or value; a setting only make_app can judge, e.g. a
    wiki_dir that is missing) is one line on stderr, `config error: <key>: <why>`, and exit
    code EXIT_CONFIG, before anything else is logged. `section` names the config section
    holding the daemon's host and port.
    """
    try:
        cfg = load()
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_CONFIG
    logs.configure(cfg.log.level, cfg.log.format, service=service)
    try:
        check_exposure(cfg, section)
        app = make_app(cfg)
    except ConfigError as exc:
        print(str(exc), file=sys.stderr, flush=True)
        return EXIT_CONFIG
    log.info("config", config=redacted(cfg))
    warn_renamed(cfg)
    where = getattr(cfg, section)
    run(app, where.host, where.port)
    return 0
