"""ZooKeeper-mode clustering (Kafka 2.x–3.x): brokers coordinated through ZooKeeper.

`znodes` holds Kafka's znode layout and JSON payloads (pure, byte-for-byte what Kafka's
`ZkData.scala` writes, so `zkCli.sh` shows a familiar tree and a reader of either side
understands the other); `zk` is the trio-side ZooKeeper client (kazoo underneath) with the
registration helpers a broker needs at start. The controller and replication build on them.
"""
