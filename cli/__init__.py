"""The `trafka` command: `trafka serve` (the process wiring in main.py: the broker, and the
Schema Registry and REST Proxy listeners beside it in one process), `trafka dev cluster|
zookeeper` (dev.py, launcher.py, zookeeper_server.py) and the operator's commands
`trafka topic|group|acl|user|cluster` (tools/, Kafka clients through confluent-kafka)."""
