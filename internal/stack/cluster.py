"""The local HA cluster of `lakehouse up --ha N`: its folder, ports and processes.

Layout under the cluster folder: `state.json` (the ports chosen on first start, kept so
that etcd's member list and Patroni's addresses stay the same across runs), `etcd/`,
`node1..N/` (PostgreSQL data directories, owned by the server's system user when we run
as root), `nodeK.yml` (Patroni's config) and `sockets/`.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

from internal.ha import conf
from internal.stack.plan import ChildSpec

STATE = "state.json"
# The system user the embedded server runs as when Lakehouse runs as root (pgserver's).
PG_USER = "pgserver"


@dataclass(frozen=True)
class Cluster:
    folder: Path
    members: tuple[conf.EtcdMember, ...]
    nodes: tuple[conf.Node, ...]
    specs: tuple[ChildSpec, ...]  # etcd members first, then the Patroni nodes

    @property
    def dsn(self) -> str:
        return conf.multi_host_dsn(self.nodes)

    @property
    def node_dsns(self) -> list[str]:
        return [n.dsn for n in self.nodes]

    @property
    def patroni_urls(self) -> list[str]:
        return [n.rest_url for n in self.nodes]


def free_ports(count: int, taken: set[int] | None = None) -> list[int]:
    """Ports the kernel has free now on loopback (bound then released)."""
    ports: list[int] = []
    held = []
    try:
        while len(ports) < count:
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            held.append(s)
            port = s.getsockname()[1]
            if port not in (taken or set()):
                ports.append(port)
    finally:
        for s in held:
            s.close()
    return ports


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _load_state(folder: Path, n_nodes: int, n_etcd: int) -> dict[str, list[int] | str]:
    """The ports of an earlier run of the same shape, or fresh ones (then a fresh etcd)."""
    path = folder / STATE
    with contextlib.suppress(FileNotFoundError, ValueError):
        state = json.loads(path.read_text())
        if len(state["pg"]) >= n_nodes and len(state["etcd"]) == 2 * n_etcd:
            return dict(state)
    ports = free_ports(2 * n_nodes + 2 * n_etcd)
    state = {"pg": ports[:n_nodes], "rest": ports[n_nodes:2 * n_nodes],
             "etcd": ports[2 * n_nodes:], "token": secrets.token_hex(8)}
    # etcd keeps its member list in its data; new ports need a new etcd (Patroni then
    # finds the nodes' data directories and elects one of them again).
    shutil.rmtree(folder / "etcd", ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(state))
    return dict(state)


def _owner() -> str:
    """The user Patroni (and so PostgreSQL) runs as: ours, or pgserver's when root."""
    if os.geteuid() != 0:
        return ""
    from internal.pg.embedded import import_pgserver

    import_pgserver()
    from pgserver.utils import ensure_user_exists

    ensure_user_exists(PG_USER)
    return PG_USER


def _chown(path: Path, user: str) -> None:
    if not user:
        return
    import pwd

    entry = pwd.getpwnam(user)
    os.chown(path, entry.pw_uid, entry.pw_gid)


def _world_reachable(path: Path) -> bool:
    """Can any user run this file (every folder on the way searchable)?"""
    path = path.resolve()
    if not path.exists() or not os.stat(path).st_mode & 0o001:
        return False
    return all(os.stat(p).st_mode & 0o001 for p in path.parents)


def interpreter(user: str) -> tuple[list[str], dict[str, str]]:
    """A Python of our version that `user` can run, with the environment that finds our
    packages. Our own unless it lives where only we can reach (a pyenv under /root):
    then the system's of the same version, on our site-packages (same ABI)."""
    if not user or _world_reachable(Path(sys.executable)):
        return [sys.executable], {}
    import sysconfig

    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for folder in ("/usr/bin", "/usr/local/bin"):
        candidate = Path(folder) / version
        if _world_reachable(candidate):
            paths = sysconfig.get_paths()
            site = os.pathsep.join(dict.fromkeys((paths["purelib"], paths["platlib"])))
            # -S: none of the system's own packages (Debian's pyOpenSSL breaks ours).
            return [str(candidate), "-S"], {"PYTHONPATH": site}
    raise RuntimeError(f"no {version} that user {user} can run (ours is {sys.executable}); "
                       f"install Debian's {version} or run as a user other than root")


def prepare(folder: Path, n_nodes: int, *, n_etcd: int = 1, scope: str = "lakehouse",
            timing: conf.Timing | None = None, synchronous: bool = True,
            etcd_bin: str = "") -> Cluster:
    """Write every config under folder and return the processes to run."""
    from internal.backup import pgbackup

    if n_nodes < conf.MIN_NODES:
        raise ValueError(f"nodes: at least {conf.MIN_NODES}, got {n_nodes}")
    folder = folder.expanduser().resolve()
    folder.mkdir(parents=True, exist_ok=True)
    state = _load_state(folder, n_nodes, n_etcd)
    pg, rest, etcd_ports = (list(map(int, state[k])) for k in ("pg", "rest", "etcd"))
    for port in (*pg[:n_nodes], *rest[:n_nodes], *etcd_ports):
        if not _port_free(port):
            raise RuntimeError(f"port {port} of the HA cluster in {folder} is in use "
                               f"(another cluster running? remove {folder / STATE} to choose new ports)")
    user = _owner()
    if user and not all(os.stat(p).st_mode & 0o001 for p in folder.parents):
        raise RuntimeError(f"data_dir: {folder} must be reachable by the system user {user} "
                           "(PostgreSQL refuses root): a folder above it is not searchable")
    _chown(folder, user)
    sockets = folder / "sockets"
    sockets.mkdir(exist_ok=True)
    _chown(sockets, user)
    members = tuple(conf.EtcdMember(f"etcd{i + 1}", etcd_ports[2 * i], etcd_ports[2 * i + 1])
                    for i in range(n_etcd))
    nodes = tuple(conf.Node(f"node{i + 1}", pg[i], rest[i], folder / f"node{i + 1}")
                  for i in range(n_nodes))
    etcd = etcd_bin or shutil.which("etcd") or "/usr/bin/etcd"
    specs: list[ChildSpec] = []
    for m in members:
        argv = conf.etcd_argv(m, members, folder / "etcd", str(state["token"]), etcd)
        specs.append(ChildSpec(m.name, "", "127.0.0.1", m.client_port, argv=tuple(argv),
                               ready_path="/health"))
    hosts = conf.etcd_hosts(members)
    python, env = interpreter(user)
    for node in nodes:
        body = conf.patroni_config(node, nodes, hosts, scope=scope, bin_dir=pgbackup.bin_dir(),
                                   timing=timing or conf.Timing(), synchronous=synchronous,
                                   socket_dir=sockets)
        path = folder / f"{node.name}.yml"
        path.write_text(json.dumps(body, indent=1))  # JSON is YAML
        _chown(path, user)
        specs.append(ChildSpec(node.name, "", "127.0.0.1", node.rest_port,
                               argv=(*python, "-m", "patroni", str(path)), env=env,
                               ready_path="/health", user=user))
    return Cluster(folder, members, nodes, tuple(specs))


def _ports(folder: Path, key: str) -> list[int]:
    try:
        state = json.loads((folder.expanduser() / STATE).read_text())
        return [int(p) for p in state[key]]
    except (OSError, ValueError, KeyError, TypeError):
        return []


def rest_urls(folder: Path) -> list[str]:
    """The Patroni REST APIs of the cluster `up --ha` made in folder ([] when none)."""
    return [f"http://127.0.0.1:{p}" for p in _ports(folder, "rest")]


def node_dsns(folder: Path) -> list[str]:
    """Each node's own DSN, in node order ([] when no cluster was made there)."""
    return [f"host=127.0.0.1 port={p} user=postgres dbname=postgres"
            for p in _ports(folder, "pg")]


def postmaster_pid(data_dir: Path) -> int | None:
    """The postmaster pid of a node whose data directory is on this machine."""
    try:
        return int((data_dir / "postmaster.pid").read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return None
