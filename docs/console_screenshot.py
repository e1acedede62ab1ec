"""Take docs/console.png, the README's picture of the web console, from a realistic dataset.

    python docs/console_screenshot.py            # writes docs/console.png

Starts a broker process on free loopback ports, creates a few topics, produces JSON
orders with confluent-kafka, leaves a consumer group behind with some lag, keeps a
producer running so the rate charts have a curve, and photographs the overview in
headless Chromium (Debian's chromium + chromium-driver, as the console tests use).
"""

from __future__ import annotations

import json
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import confluent_kafka as ck  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from selenium import webdriver  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

from tests.brokerproc import BrokerProcess  # noqa: E402

OUT = REPO / "docs" / "console.png"
TOPICS = {"orders": 6, "payments": 3, "clickstream": 12, "inventory-updates": 2}


def dataset(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(t, n, 1) for t, n in TOPICS.items()]).values():
        future.result(30)
    producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    rng = random.Random(19)
    for i in range(6000):
        order = {"order_id": f"o-{i:05d}", "customer": f"c-{rng.randrange(400)}", "amount": round(rng.uniform(3, 250), 2)}
        producer.produce("orders", key=order["customer"], value=json.dumps(order))
        if i % 3 == 0:
            producer.produce("payments", key=order["order_id"], value=json.dumps({"order_id": order["order_id"], "ok": True}))
        producer.produce("clickstream", key=f"s-{rng.randrange(900)}", value=json.dumps({"page": f"/p/{rng.randrange(50)}"}))
    producer.flush(60)
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "billing", "auto.offset.reset": "earliest"})
    consumer.subscribe(["orders"])
    seen, deadline = 0, time.monotonic() + 30
    while seen < 3500 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        seen += msg is not None and not msg.error()
    consumer.commit(asynchronous=False)
    consumer.close()


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp, BrokerProcess(Path(tmp) / "data", http=True) as broker:
        dataset(broker.bootstrap)
        stop = threading.Event()

        def traffic() -> None:
            producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
            consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "analytics",
                                    "auto.offset.reset": "earliest"})
            consumer.subscribe(["clickstream"])
            rng = random.Random(7)
            while not stop.is_set():
                for _ in range(rng.randrange(100, 400)):
                    producer.produce("clickstream", value=json.dumps({"page": f"/p/{rng.randrange(50)}"}))
                producer.poll(0)
                for _ in range(50):
                    consumer.poll(0.005)
            producer.flush(10)
            consumer.close()

        thread = threading.Thread(target=traffic, daemon=True)
        thread.start()
        profile = tempfile.mkdtemp(prefix="trafka-chromium-")
        options = webdriver.ChromeOptions()
        options.binary_location = "/usr/bin/chromium"
        for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--disable-background-networking", "--disable-component-update", "--disable-sync",
                     "--no-first-run", f"--user-data-dir={profile}", "--window-size=1300,900"):
            options.add_argument(flag)
        driver = webdriver.Chrome(service=webdriver.ChromeService(executable_path="/usr/bin/chromedriver"),
                                  options=options)
        try:
            driver.get(broker.http_url + "/")
            chart = WebDriverWait(driver, 15).until(lambda d: d.find_element(By.ID, "chart-messages"))
            WebDriverWait(driver, 120, 1).until(lambda d: int(chart.get_attribute("data-points") or 0) >= 25)
            driver.save_screenshot(str(OUT))
        finally:
            driver.quit()
            stop.set()
            thread.join(15)
    print(f"{OUT} ({OUT.stat().st_size // 1024} KiB)")


if __name__ == "__main__":
    main()
