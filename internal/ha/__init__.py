"""High availability: what a daemon needs to follow a Patroni cluster's leader (`follow`,
`patroni`: its REST API), the cluster's configuration as data (`conf`) and its status as
shown (`status`). Below the daemons (vectord follows, the gateway shows); the local
cluster's folder and processes (`lakehouse up --ha N`) are the stack's
(internal.stack.cluster), and the failover drill is the tests' (tests/ha/drill.py)."""
