"""The scenario-level differential check: what each scenario observed through the client
adapters, recorded per (scenario, client, broker kind), normalised, and compared between
Apache Kafka and Trafka.

Two brokers can both let a scenario pass while answering differently (another error code,
another timestamp type, a describe output with other fields). Every verb a scenario calls
through `make_client`'s adapters is logged with its answer (compat_tests/recording.py, below
the client adapters that use it), the log is made comparable by rules that each say why
(`normalise`), and the logs of the two brokers are compared at the end of the session
(`compare`, run by the generated test of `plugin`); a difference that `allowlist` does not
explain with a reason fails the run.
"""
