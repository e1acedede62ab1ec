"""The cluster: brokers replicating partitions, coordinated by ZooKeeper (Kafka's
ZooKeeper mode, 2.x–3.x; docs/design/replication.md).

- ZooKeeper itself (the client and Kafka's znode layout) is server/zookeeper/, below this
  package: groups, SCRAM credentials and dynamic configs keep state there too.
- `client`: inter-broker requests (BrokerClient, BrokerChannels).
- `controller`: the elected controller (leaders, ISRs, LeaderAndIsr/UpdateMetadata/StopReplica).
- `node`: this broker as a member (registration, applying the controller's requests);
  `config_manager`: topic configs in ZooKeeper (/config/topics, /config/changes);
  `metadata_cache`: what clients are told; `fetcher`: followers copying leaders
  (with its own Fetch v12 encoder/decoder, wire/fetch_codec.py);
  `followers`: the leader's view of its followers; `alter_partition`: ISR changes sent to the
  controller; `admin`: CreateTopics/CreatePartitions/DeleteTopics through ZooKeeper;
  `producer_ids`: producer id blocks allocated cluster-wide in /latest_producer_id_block.
"""
