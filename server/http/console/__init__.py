"""The web console at `/` of the HTTP listener: brokers, topics, a message
browser, consumer groups with lag, live rates, and create/delete topic and reset offsets.

Why a room of its own, and this shape: the console reads the broker's state in-process,
the way `server/http/metrics.py` does (no Kafka client, no second process), and changes it
only through the Kafka handlers themselves (`calls.py`), so validation, error codes,
authorization and ZooKeeper cluster mode are the ones Kafka clients get. The page is
static files shipped in the package (no CDN, no build step): it works without internet.
Under an authorizer the console is an unauthenticated client (User:ANONYMOUS) for reads
and actions alike; `trafka.console.enable=false` leaves the listener without it.

- calls.py    one Kafka request answered by its handler, in-process
- views.py    brokers, topics, partitions and groups as JSON-ready dicts (reads only)
- browse.py   reading and decoding records of one partition (text, JSON, hex, Avro)
- api.py      the `/api/...` routes and their JSON errors; `routes()` mounts the console
- static/     index.html, app.js, console.css
"""
