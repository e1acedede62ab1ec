"""The cluster: brokers replicating partitions, coordinated by ZooKeeper (Kafka's ZooKeeper mode)."""
