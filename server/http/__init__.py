"""The broker's HTTP listener (`http.listeners`): Prometheus `/metrics`, `/healthz`, `/readyz`.

Why here and this way: operators chart Kafka through the Prometheus JMX exporter, so the
metrics carry the names it gives Kafka's MBeans; the listener runs in the broker's own trio
process (hypercorn's trio worker serving a starlette app), so there is no second process to
deploy, and scraping never holds up the Kafka data path (the text is rendered in a worker
thread from plain counters the data path bumps once per request or batch).

- metrics.py  the hot-path request counters and the scrape-time Collector
- app.py      the routes
- server.py   binding `http.listeners` and serving it with hypercorn
- console/    the web console at `/` (JSON under /api/, static page, no CDN)

The bound listening socket comes from http_common/listen.py, shared with the Schema
Registry and the REST Proxy.

Importing this package imports none of hypercorn, starlette or prometheus_client: a broker
with `http.listeners=""` never loads them.
"""
