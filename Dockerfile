# Trafka: a Kafka-compatible broker. Build: docker build -t trafka .
# Run:   docker run -p 9092:9092 -e TRAFKA_ADVERTISED_LISTENERS=localhost:9092 -v trafka-data:/data trafka
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    TRAFKA_LISTENERS=0.0.0.0:9092 \
    TRAFKA_LOG_DIRS=/data

WORKDIR /app
COPY pyproject.toml README.md ./
COPY wire ./wire
COPY storage ./storage
COPY server ./server
COPY spark_jobs ./spark_jobs
RUN pip install --no-cache-dir . \
    && useradd --system --uid 10001 --home-dir /data trafka \
    && mkdir -p /data && chown trafka /data

USER trafka
VOLUME ["/data"]
EXPOSE 9092

# An ApiVersions round trip against the broker itself, not just an open port.
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 \
    CMD ["python", "-m", "server.healthcheck", "127.0.0.1:9092"]

# The advertised address comes from TRAFKA_ADVERTISED_LISTENERS (host:port) when set.
ENTRYPOINT ["trafka", "serve"]
