"""PySpark pipelines on Trafka, through Spark's own Kafka connector (``format("kafka")``).

Jobs, each runnable as ``python -m spark_jobs.<job> --help``:

- ``events_to_aggregates``: streaming windowed counts of JSON click events, Kafka -> Kafka
  (and Parquet), checkpointed.
- ``topic_archive``: a topic into Parquet partitioned by date, batch or streaming.
- ``replay``: a batch re-read by offsets or timestamp, summarised as a JSON report.
- ``generate``: realistic events (keys, headers, out-of-order event times) into a topic.
- ``jars``: check or assemble the connector jars for offline machines.

Each job keeps its transformation (DataFrame -> DataFrame) apart from its I/O so that the
transformations are tested without a broker (``tests/spark``), and the connector end to end
in ``compat_tests/test_spark_connector.py``. See ``spark_jobs/README.md``.
"""
