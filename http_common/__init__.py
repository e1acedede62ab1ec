"""What Trafka's HTTP services share: binding a listener and serving it with hypercorn on the
broker's trio loop (listen.py: the broker's HTTP side, the Schema Registry, the REST Proxy),
Confluent's error answer (confluent.py) and loading PROTOBUF schema files (protobuf_files.py:
the registry and the proxy)."""
