"""The HA cluster's pure parts: Patroni's config, its /cluster answer, the leader's DSN."""

from __future__ import annotations

from pathlib import Path

import pytest

from internal.config import ConfigError, load
from internal.ha import conf, patroni
from internal.ha.follow import leader_first
from internal.ha.status import from_readyz, table

NODES = tuple(conf.Node(f"node{i}", 5430 + i, 8000 + i, Path(f"/d/node{i}")) for i in (1, 2, 3))


def test_patroni_config_is_synchronous_with_rewind_and_fast_handover() -> None:
    body = conf.patroni_config(NODES[0], NODES, ["127.0.0.1:2379"], scope="lh",
                               bin_dir=Path("/bin"), timing=conf.Timing(), synchronous=True,
                               socket_dir=Path("/s"))
    dcs = body["bootstrap"]["dcs"]
    assert dcs["synchronous_mode"] is True and dcs["primary_start_timeout"] == 0
    assert dcs["postgresql"]["use_pg_rewind"] is True
    assert body["postgresql"]["listen"] == "127.0.0.1:5431"
    assert body["etcd3"] == {"hosts": ["127.0.0.1:2379"]}
    off = conf.patroni_config(NODES[0], NODES, [], scope="lh", bin_dir=Path("/bin"),
                              timing=conf.Timing(), synchronous=False, socket_dir=Path("/s"))
    assert off["bootstrap"]["dcs"]["synchronous_mode"] is False


def test_timing_that_patroni_would_refuse_is_refused() -> None:
    with pytest.raises(ValueError, match="ttl"):
        conf.Timing(ttl=20, loop_wait=5, retry_timeout=10).check()


def test_multi_host_dsn_names_every_node_and_wants_the_leader() -> None:
    dsn = conf.multi_host_dsn(NODES)
    assert "port=5431,5432,5433" in dsn and "target_session_attrs=read-write" in dsn


def test_leader_first_moves_the_leader_to_the_front() -> None:
    moved = leader_first(conf.multi_host_dsn(NODES), "127.0.0.1", 5433)
    assert "port=5433,5431,5432" in moved and "target_session_attrs=read-write" in moved
    added = leader_first("host=a port=1", "b", 2)
    assert "host=b,a" in added and "port=2,1" in added


CLUSTER = {"members": [
    {"name": "node2", "role": "leader", "state": "running", "host": "127.0.0.1", "port": 5432,
     "timeline": 3, "api_url": "http://127.0.0.1:8002/patroni"},
    {"name": "node1", "role": "sync_standby", "state": "streaming", "host": "127.0.0.1",
     "port": 5431, "timeline": 3, "lag": 0, "api_url": "http://127.0.0.1:8001/patroni"},
    {"name": "node3", "role": "replica", "state": "streaming", "host": "127.0.0.1",
     "port": 5433, "timeline": 3, "lag": 1024}]}


def test_members_and_leader_from_a_cluster_answer() -> None:
    nodes = patroni.members(CLUSTER)
    assert [n.name for n in nodes] == ["node1", "node2", "node3"]
    lead = patroni.leader(nodes)
    assert lead is not None and lead.name == "node2" and lead.api_url == "http://127.0.0.1:8002"
    assert patroni.members({"members": [{"name": "x", "role": "master", "state": "running"}]}
                           )[0].role == "leader"
    assert patroni.leader(patroni.members({"members": [
        {"name": "x", "role": "leader", "state": "stopped"}]})) is None


def test_status_from_the_gateway_readyz_and_as_a_table() -> None:
    nodes = [m.as_dict(pid=7) for m in patroni.members(CLUSTER)]
    components = {"vectord": {"detail": {"components": {"ha": {"nodes": nodes}}}}}
    assert from_readyz(components) == nodes
    assert from_readyz({"vectord": {"detail": {"components": {}}}}) is None
    text = table(nodes)
    assert text.splitlines()[0].split() == ["node", "role", "state", "lag", "timeline", "pid"]
    assert "sync_standby" in text and "1024" in text


def test_ha_config_section(tmp_path: Path) -> None:
    path = tmp_path / "lakehouse.toml"
    path.write_text('[ha]\nnodes = 3\netcd_members = 3\ndata_dir = "cluster"\n')
    cfg = load(path, env={})
    assert cfg.ha.nodes == 3 and cfg.ha.synchronous
    assert cfg.ha.data_dir == str((tmp_path / "cluster").resolve())
    path.write_text("[ha]\nnodes = 2\n")
    with pytest.raises(ConfigError, match=r"ha\.nodes"):
        load(path, env={})
