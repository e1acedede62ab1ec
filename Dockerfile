# Trafka: a Kafka-compatible broker. Build: docker build -t trafka .
# Run:   docker run -p 9092:9092 -e TRAFKA_ADVERTISED_LISTENERS=localhost:9092 -v trafka-data:/data trafka
# All the cores of a host (one broker per core, one cluster; ports 9092, 9093, ...):
#        docker run --network host -e TRAFKA_BROKERS_PER_HOST=auto -e TRAFKA_ZOOKEEPER_CONNECT=zk:2181 \
#                   -e TRAFKA_NODE_ID=1 -v trafka-data:/data trafka
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    TRAFKA_LISTENERS=0.0.0.0:9092 \
    TRAFKA_HTTP_LISTENERS=0.0.0.0:8080 \
    TRAFKA_SCHEMA_REGISTRY_LISTENERS=0.0.0.0:8081 \
    TRAFKA_REST_PROXY_LISTENERS=0.0.0.0:8082 \
    TRAFKA_LOG_DIRS=/data

WORKDIR /app
COPY pyproject.toml README.md LICENSE ./
COPY wire ./wire
COPY storage ./storage
COPY server ./server
COPY schema_registry ./schema_registry
COPY rest_proxy ./rest_proxy
COPY cli ./cli
COPY http_common ./http_common
RUN pip install --no-cache-dir '.[rest]' \
    && useradd --system --uid 10001 --home-dir /data trafka \
    && mkdir -p /data && chown trafka /data

USER trafka
VOLUME ["/data"]
# 8080: /metrics (Prometheus), /healthz, /readyz (server/http/); 8081: the Schema Registry
# (schema_registry/); 8082: the REST Proxy (rest_proxy/); brokers per host:
# 8080/8081/8082, 8090/8091/8092, ...
EXPOSE 9092 8080 8081 8082

# An ApiVersions round trip against the broker itself, not just an open port.
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 \
    CMD ["python", "-m", "server.healthcheck", "127.0.0.1:9092"]

# Descriptors: the broker raises its soft `ulimit -n` to the hard limit at start-up (logged with
# both values; a container's soft limit is often 1024 under a far higher hard one), and
# log.open.files.max is half of that, so 100 000 partitions need no --ulimit flag. A lower
# hard limit (--ulimit nofile=N:N) caps both.
# The advertised address comes from TRAFKA_ADVERTISED_LISTENERS (host:port) when set.
# TRAFKA_BROKERS_PER_HOST=N|auto runs N brokers of one cluster (cli/entrypoint.py).
ENTRYPOINT ["trafka-entrypoint"]
