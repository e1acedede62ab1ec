"""ZooKeeper as Kafka's ZooKeeper mode uses it: the trio-side client (client.py, kazoo
underneath) and Kafka's znode layout with its JSON payloads (znodes.py: what ZkData.scala
writes, so `zkCli.sh` shows a familiar tree).

Below everything that keeps state in ZooKeeper: the cluster (server/cluster/), committed
offsets and share-group state in ZooKeeper mode (server/groups/), SCRAM credentials
(server/security/sasl/scram_store.py) and the dynamic broker configs' format
(server/broker_configs.py)."""
