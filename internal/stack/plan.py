"""Which processes `lakehouse up` runs, on which ports, with which environment.

Pure: the supervisor turns this plan into processes. Every child reads the same
config file; the environment pins ports and upstream URLs so that the daemons
agree with each other whatever overrides the user gave.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from internal.config import Config


@dataclass(frozen=True)
class ChildSpec:
    name: str
    module: str  # run as `python -m <module>`
    host: str
    port: int
    env: dict[str, str] = field(default_factory=dict)
    # A process that is not one of our daemons (etcd, Patroni): its command line, the
    # path that answers 200 when it is ready, and the system user it runs as ("": ours).
    argv: tuple[str, ...] = ()
    ready_path: str = "/readyz"
    user: str = ""

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


# Start order; the gateway last, so its /readyz is the stack's.
DAEMONS = ("embedd", "vectord", "matrixd", "syncd", "mcpd", "gateway")
_SECTION = {"embedd": "embedd", "vectord": "vectord", "matrixd": "matrixd",
            "syncd": "sync", "mcpd": "mcpd", "gateway": "gateway"}


def _url(host: str, port: int) -> str:
    return f"http://{host}:{port}"


def plan(cfg: Config, dsn: str, config_file: str | None = None,
         service_token: str = "", read_dsns: Sequence[str] = ()) -> list[ChildSpec]:
    """One ChildSpec per daemon, in start order.

    service_token: what the daemons present to each other (and accept), given to every
    child; the caller makes one up when tokens are configured and none is set.
    """
    addr = {d: (getattr(cfg, _SECTION[d]).host, getattr(cfg, _SECTION[d]).port) for d in DAEMONS}
    url = {d: _url(*addr[d]) for d in DAEMONS}
    env: dict[str, str] = {
        "LAKEHOUSE_GATEWAY_EMBEDD": url["embedd"],
        "LAKEHOUSE_GATEWAY_VECTORD": url["vectord"],
        "LAKEHOUSE_GATEWAY_MATRIXD": url["matrixd"],
        "LAKEHOUSE_GATEWAY_SYNCD": url["syncd"],
        "LAKEHOUSE_GATEWAY_MCPD": url["mcpd"],
        "LAKEHOUSE_MCPD_GATEWAY_URL": url["gateway"],
        "LAKEHOUSE_MATRIXD_VECTORD_URL": url["vectord"],
        "LAKEHOUSE_SYNC_VECTORD_URL": url["vectord"],
        "LAKEHOUSE_SYNC_MATRIXD_URL": url["matrixd"],  # [sync] normalize
    }
    # An empty embedd_url means "no embedding" for that daemon: keep it so.
    if cfg.matrixd.embedd_url:
        env["LAKEHOUSE_MATRIXD_EMBEDD_URL"] = url["embedd"]
    if cfg.sync.embedd_url:
        env["LAKEHOUSE_SYNC_EMBEDD_URL"] = url["embedd"]
    if cfg.vectord.embedd_url:
        env["LAKEHOUSE_VECTORD_EMBEDD_URL"] = url["embedd"]
    for d in DAEMONS:
        env[f"LAKEHOUSE_{_SECTION[d].upper()}_PORT"] = str(addr[d][1])
    if dsn:
        env["LAKEHOUSE_PG_DSN"] = dsn
    if read_dsns:  # the standbys `lakehouse up --replicas` started, with any configured
        env["LAKEHOUSE_VECTORD_READ_DSNS"] = ",".join(read_dsns)
    if config_file:
        env["LAKEHOUSE_CONFIG"] = config_file
    if service_token:
        env["LAKEHOUSE_GATEWAY_SERVICE_TOKEN"] = service_token
    return [ChildSpec(d, f"internal.{d}.server", addr[d][0], addr[d][1], dict(env)) for d in DAEMONS]
