"""What `lakehouse up --ha N` runs: etcd members and Patroni nodes, their ports and files.

Pure: ports come in, configuration dicts go out; internal/stack/cluster.py writes them and
starts the processes. Patroni drives the embedded PostgreSQL 18 binaries (pgserver's
bin/), one data directory a node, all on loopback.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Patroni refuses loop_wait + 2 * retry_timeout > ttl: the leader must be able to renew
# its key (retrying for retry_timeout) before the key expires.
MIN_NODES = 3


@dataclass(frozen=True)
class EtcdMember:
    name: str
    client_port: int
    peer_port: int

    @property
    def client_url(self) -> str:
        return f"http://127.0.0.1:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"http://127.0.0.1:{self.peer_port}"


@dataclass(frozen=True)
class Node:
    name: str
    pg_port: int
    rest_port: int
    data_dir: Path

    @property
    def dsn(self) -> str:
        return f"host=127.0.0.1 port={self.pg_port} user=postgres dbname=postgres"

    @property
    def rest_url(self) -> str:
        return f"http://127.0.0.1:{self.rest_port}"


@dataclass(frozen=True)
class Timing:
    """Patroni's clock: the leader key lives `ttl` s, renewed every `loop_wait` s."""

    ttl: int = 20  # Patroni raises a smaller ttl to 20 s
    loop_wait: int = 1
    retry_timeout: int = 4

    def check(self) -> None:
        if self.loop_wait + 2 * self.retry_timeout > self.ttl:
            raise ValueError("ttl: must be >= loop_wait + 2 * retry_timeout")


def etcd_argv(member: EtcdMember, members: Sequence[EtcdMember], data_dir: Path,
              token: str, etcd_bin: str = "etcd") -> list[str]:
    """The command line of one etcd member of a fresh or existing loopback cluster."""
    initial = ",".join(f"{m.name}={m.peer_url}" for m in members)
    return [etcd_bin, "--name", member.name, "--data-dir", str(data_dir / member.name),
            "--listen-client-urls", member.client_url,
            "--advertise-client-urls", member.client_url,
            "--listen-peer-urls", member.peer_url,
            "--initial-advertise-peer-urls", member.peer_url,
            "--initial-cluster", initial, "--initial-cluster-token", token,
            "--initial-cluster-state", "new",
            # A member's heartbeat and election tuned for one machine's loopback.
            "--heartbeat-interval", "100", "--election-timeout", "1000",
            "--logger", "zap", "--log-level", "warn"]


def etcd_hosts(members: Sequence[EtcdMember]) -> list[str]:
    return [f"127.0.0.1:{m.client_port}" for m in members]


def patroni_config(node: Node, nodes: Sequence[Node], etcd: Sequence[str], *,
                   scope: str, bin_dir: Path, timing: Timing, synchronous: bool,
                   socket_dir: Path) -> dict[str, Any]:
    """Patroni's YAML (as a dict) for one node.

    Trust authentication on loopback only: every node, etcd and the daemons are on this
    machine. synchronous_mode makes a commit wait for one standby's flush, so a write
    acknowledged to a client is on two nodes; without it a failover may lose the last
    writes the old leader acknowledged but had not sent yet."""
    timing.check()
    loopback = ["local all all trust", "host all all 127.0.0.1/32 trust",
                "host replication all 127.0.0.1/32 trust", "local replication all trust"]
    return {
        "scope": scope,
        "namespace": "/lakehouse/",
        "name": node.name,
        "log": {"level": "INFO", "format": "%(asctime)s %(levelname)s: %(message)s"},
        "restapi": {"listen": f"127.0.0.1:{node.rest_port}",
                    "connect_address": f"127.0.0.1:{node.rest_port}"},
        "etcd3": {"hosts": list(etcd)},
        "bootstrap": {
            "dcs": {
                "ttl": timing.ttl, "loop_wait": timing.loop_wait,
                "retry_timeout": timing.retry_timeout,
                "maximum_lag_on_failover": 1024 * 1024,
                # A crashed leader hands over at once rather than restarting in place:
                # with a synchronous standby nothing acknowledged is lost by it.
                "primary_start_timeout": 0,
                "synchronous_mode": synchronous,
                "postgresql": {
                    "use_pg_rewind": True, "use_slots": True,
                    "parameters": {
                        "wal_level": "replica", "hot_standby": "on", "wal_log_hints": "on",
                        "max_wal_senders": 10, "max_replication_slots": 10,
                        "max_connections": 200, "hot_standby_feedback": "on",
                        "wal_keep_size": "256MB",
                    },
                },
            },
            "initdb": [{"encoding": "UTF8"}, {"locale": "C.UTF-8"}],
            "pg_hba": loopback,
        },
        "postgresql": {
            "listen": f"127.0.0.1:{node.pg_port}",
            "connect_address": f"127.0.0.1:{node.pg_port}",
            "data_dir": str(node.data_dir),
            "bin_dir": str(bin_dir),
            "pgpass": str(node.data_dir.with_name(f"{node.name}.pgpass")),
            "pg_hba": loopback,
            "authentication": {"superuser": {"username": "postgres"},
                               "replication": {"username": "replicator"},
                               "rewind": {"username": "postgres"}},
            "parameters": {"unix_socket_directories": str(socket_dir),
                           "shared_buffers": "128MB",
                           "recovery_init_sync_method": "syncfs"},
        },
        "tags": {"nofailover": False, "noloadbalance": False, "clonefrom": False,
                 "nosync": False},
    }


def multi_host_dsn(nodes: Sequence[Node], *, read_write: bool = True) -> str:
    """One libpq DSN over every node: libpq tries them in order and keeps the first that
    is the leader (target_session_attrs=read-write). connect_timeout bounds each try, so
    a hung node costs 2 s, not forever."""
    hosts = ",".join("127.0.0.1" for _ in nodes)
    ports = ",".join(str(n.pg_port) for n in nodes)
    attrs = "read-write" if read_write else "any"
    return (f"host={hosts} port={ports} user=postgres dbname=postgres "
            f"target_session_attrs={attrs} connect_timeout=2")
