"""The console in a real browser: headless Chromium (Debian's `chromium` and
`chromium-driver` packages, installed by .ci/run) driven by selenium through the overview,
topic, message browser and group pages and the create/delete/reset dialogs, each checked
against the Kafka API. Screenshots go to test-artifacts/console/ (git-ignored)."""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
import time
import uuid
from pathlib import Path

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

from tests.brokerproc import REPO
from tests.http.console.conftest import produce, wait_for

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
ARTIFACTS = REPO / "test-artifacts" / "console"

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(not CHROMIUM.exists() or not CHROMEDRIVER.exists(),
                       reason="needs Debian's chromium and chromium-driver (/usr/bin/chromium, /usr/bin/chromedriver)"),
]



@pytest.fixture(scope="module")
def browser():
    profile = tempfile.mkdtemp(prefix="trafka-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--no-first-run", f"--user-data-dir={profile}", "--window-size=1400,1000"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=webdriver.ChromeService(executable_path=str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(autouse=True)
def no_script_errors(browser):
    """Every page test ends without a JavaScript error in the console (an API's 4xx answer
    logs "Failed to load resource", which the tests provoke on purpose)."""
    browser.get_log("browser")  # drop what earlier tests left
    yield
    errors = [e["message"] for e in browser.get_log("browser")
              if e["level"] == "SEVERE" and "Failed to load resource" not in e["message"]]
    assert not errors, errors


def screenshot(driver, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(ARTIFACTS / f"{name}.png"))


def waiter(driver, timeout: float = 15) -> WebDriverWait:
    """Pages re-render after an action: an element found a moment ago may be gone; look again."""
    return WebDriverWait(driver, timeout, ignored_exceptions=[StaleElementReferenceException])


def wait_css(driver, selector: str, timeout: float = 15):
    return waiter(driver, timeout).until(lambda d: d.find_element(By.CSS_SELECTOR, selector))


def wait_text(driver, selector: str, text: str, timeout: float = 15):
    def has(d):
        found = d.find_elements(By.CSS_SELECTOR, selector)
        return found[0] if found and text in found[0].text else False
    return waiter(driver, timeout).until(has, f"{text!r} in {selector}")


def open_page(driver, broker, hash_: str) -> None:
    """A fresh load of the page (a bare hash change would keep the last page's DOM until the
    new one renders), waited for until it has rendered."""
    driver.get("about:blank")
    driver.get(f"{broker.http_url}/#/{hash_}")
    page = hash_.split("/")[0] or "overview"
    waiter(driver).until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-page") == page)


def new_topic(broker, partitions: int = 1) -> str:
    name = f"ui-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # kept alive until the answer
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    return name


def test_overview_shows_the_broker_and_topics(broker, browser):
    topic = new_topic(broker)
    open_page(browser, broker, "")
    row = wait_css(browser, "#brokers tr[data-broker]")
    assert "controller" in row.text and str(broker.port) in row.text
    wait_css(browser, f'#topics tr[data-topic="{topic}"]')
    screenshot(browser, "overview")


def test_topic_page_shows_partitions_and_offsets(broker, browser):
    topic = new_topic(broker, partitions=2)
    produce(broker.bootstrap, topic, [{"value": b"v"}] * 3, partition=1)
    open_page(browser, broker, f"topic/{topic}")
    row = wait_css(browser, '#partitions tr[data-partition="1"]')
    assert row.find_element(By.CSS_SELECTOR, ".hw").text == "3"
    assert row.find_element(By.CSS_SELECTOR, ".log-start").text == "0"
    assert browser.find_element(By.CSS_SELECTOR, '#partitions tr[data-partition="0"] .hw').text == "0"
    screenshot(browser, "topic")


def test_message_browser_modes_and_starts(broker, browser):
    topic = new_topic(broker)
    base = int(time.time() * 1000) - 600_000
    produce(broker.bootstrap, topic, [
        {"key": b"order-1", "value": json.dumps({"item": "book", "qty": 2}).encode(), "timestamp": base},
        {"key": b"order-2", "value": b"plain text", "timestamp": base + 60_000},
    ])
    open_page(browser, broker, f"browse/{topic}/0")
    first = wait_css(browser, '#records tr[data-offset="0"]')
    assert first.find_element(By.CSS_SELECTOR, ".key").text == "order-1"
    assert json.loads(first.find_element(By.CSS_SELECTOR, ".value").text) == {"item": "book", "qty": 2}
    Select(browser.find_element(By.ID, "mode")).select_by_value("json")
    value = browser.find_element(By.CSS_SELECTOR, '#records tr[data-offset="0"] .value pre').text
    assert value == json.dumps({"item": "book", "qty": 2}, indent=2)  # pretty-printed
    Select(browser.find_element(By.ID, "mode")).select_by_value("hex")
    assert browser.find_element(By.CSS_SELECTOR, '#records tr[data-offset="0"] .key').text == \
        " ".join(f"{b:02x}" for b in b"order-1")
    screenshot(browser, "browser-hex")
    Select(browser.find_element(By.ID, "mode")).select_by_value("text")
    # from an offset
    offset = browser.find_element(By.ID, "offset")
    offset.clear()
    offset.send_keys("1")
    browser.find_element(By.ID, "browse-go").click()
    wait_text(browser, "#records-info", "from offset 1")
    assert [r.get_attribute("data-offset") for r in browser.find_elements(By.CSS_SELECTOR, "#records tr[data-offset]")] == ["1"]
    # from a timestamp (ms), between the two records
    browser.find_element(By.ID, "timestamp").send_keys(str(base + 1000))
    browser.find_element(By.ID, "browse-go").click()
    wait_text(browser, "#records-info", "from offset 1")
    assert browser.find_element(By.CSS_SELECTOR, '#records tr[data-offset="1"] .value').text == "plain text"
    screenshot(browser, "browser-timestamp")


def test_group_page_shows_member_and_lag(broker, browser):
    topic = new_topic(broker)
    produce(broker.bootstrap, topic, [{"value": b"m"}] * 8)
    group = f"ui-group-{uuid.uuid4().hex[:6]}"
    consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "client.id": "ui-consumer",
                            "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        wait_for(lambda: consumer.poll(0.5) is not None and consumer.assignment(), 30, "an assignment")
        consumer.commit(offsets=[ck.TopicPartition(topic, 0, 5)], asynchronous=False)
        low, high = consumer.get_watermark_offsets(ck.TopicPartition(topic, 0), timeout=10)
        open_page(browser, broker, "groups")
        row = wait_css(browser, f'#groups tr[data-group="{group}"]')
        assert row.find_element(By.CSS_SELECTOR, ".lag").text == str(high - 5)
        open_page(browser, broker, f"group/{group}")
        members = wait_css(browser, "#members")
        assert "ui-consumer" in members.text and f"{topic}: 0" in members.text
        lag = browser.find_element(By.CSS_SELECTOR, f'#offsets tr[data-tp="{topic}-0"] .lag').text
        assert lag == str(high - 5) == "3"
        screenshot(browser, "group")
        # a group with members: the reset is refused in the dialog, with Kafka's reason
        browser.find_element(By.ID, "reset-offsets").click()
        browser.find_element(By.ID, "confirm-ok").click()
        wait_text(browser, "#confirm-error", "NON_EMPTY_GROUP")
        browser.find_element(By.ID, "confirm-cancel").click()
    finally:
        consumer.close()


def test_create_and_delete_topic_through_the_dialogs(broker, browser):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    name = f"ui-created-{uuid.uuid4().hex[:6]}"
    open_page(browser, broker, "topics")
    wait_css(browser, "#create-topic").click()
    browser.find_element(By.ID, "new-topic-name").send_keys(name)
    partitions = browser.find_element(By.ID, "new-topic-partitions")
    partitions.clear()
    partitions.send_keys("4")
    browser.find_element(By.ID, "new-topic-configs").send_keys("retention.ms=3600000")
    screenshot(browser, "create-dialog")
    browser.find_element(By.ID, "confirm-ok").click()
    wait_css(browser, '#partitions tr[data-partition="3"]')
    meta = admin.list_topics(timeout=10).topics
    assert name in meta and len(meta[name].partitions) == 4
    # a second create of the same name: the dialog stays open with Kafka's error
    open_page(browser, broker, "topics")
    wait_css(browser, "#create-topic").click()
    browser.find_element(By.ID, "new-topic-name").send_keys(name)
    browser.find_element(By.ID, "confirm-ok").click()
    wait_text(browser, "#confirm-error", "TOPIC_ALREADY_EXISTS")
    browser.find_element(By.ID, "confirm-cancel").click()
    # delete, confirmed
    open_page(browser, broker, f"topic/{name}")
    wait_css(browser, "#delete-topic").click()
    wait_text(browser, "#confirm-title", f"Delete topic {name}?")
    browser.find_element(By.ID, "confirm-ok").click()
    wait_text(browser, "#status", f"Deleted topic {name}")
    wait_for(lambda: name not in admin.list_topics(timeout=10).topics, 10, "the topic gone")


def test_reset_offsets_of_an_empty_group_through_the_dialog(broker, browser):
    topic = new_topic(broker, partitions=2)
    produce(broker.bootstrap, topic, [{"value": b"r"}] * 6, partition=0)
    produce(broker.bootstrap, topic, [{"value": b"r"}] * 2, partition=1)
    group = f"ui-reset-{uuid.uuid4().hex[:6]}"
    consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    parts = [ck.TopicPartition(topic, 0, 1), ck.TopicPartition(topic, 1, 1)]
    consumer.commit(offsets=parts, asynchronous=False)  # no subscribe: the group stays Empty
    try:
        open_page(browser, broker, f"group/{group}")
        wait_text(browser, "#group-state", "Empty")
        browser.find_element(By.ID, "reset-offsets").click()
        Select(browser.find_element(By.ID, "reset-to")).select_by_value("offset")
        offset = browser.find_element(By.ID, "reset-offset")
        offset.clear()
        offset.send_keys("4")
        browser.find_element(By.ID, "confirm-ok").click()
        wait_text(browser, "#status", f"Reset 2 offsets of {group}")
        wait_text(browser, f'#offsets tr[data-tp="{topic}-0"] .committed', "4")
        got = consumer.committed([ck.TopicPartition(topic, 0), ck.TopicPartition(topic, 1)], timeout=10)
        assert [tp.offset for tp in got] == [4, 2]  # 4 is past partition 1's end: clamped to it
        screenshot(browser, "group-reset")
    finally:
        consumer.close()


def test_rates_chart_gets_points_while_producing(broker, browser):
    topic = new_topic(broker)
    open_page(browser, broker, "")
    chart = wait_css(browser, "#chart-messages")
    stop = threading.Event()

    def keep_producing():
        producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
        while not stop.is_set():
            for _ in range(200):
                producer.produce(topic, value=b"x" * 100)
            producer.flush(10)
            time.sleep(0.05)

    thread = threading.Thread(target=keep_producing, daemon=True)
    thread.start()
    try:
        WebDriverWait(browser, 30).until(
            lambda d: int(chart.get_attribute("data-points") or 0) >= 3
            and int((chart.get_attribute("data-last") or "0").split(",")[0]) > 0,
            "points with a positive message rate")
        assert browser.find_elements(By.CSS_SELECTOR, "#chart-messages polyline")
        screenshot(browser, "rates")
    finally:
        stop.set()
        thread.join(15)
