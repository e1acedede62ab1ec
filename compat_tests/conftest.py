"""Fixtures and parametrization of the compatibility suite.

Every scenario that asks for `broker` (or `fresh_broker`) runs once per broker kind chosen
with `--broker` / COMPAT_BROKERS (default "kafka,trafka"); every scenario that asks for
`client` runs once per client library (`--clients` / COMPAT_CLIENTS, default all five:
kafka-python, confluent-kafka, aiokafka, kcat, java).

Brokers are started lazily and shared by the whole session, one process per kind; tests
keep out of each other's way with unique topic and group names. `fresh_broker` gives a
test its own process (restart scenarios), stopped at the end of the test.

Fixtures other suites may use: `broker`, `fresh_broker`, `client`, `setup_client`,
`topic_name`, `group_name`; a test without a `client` parameter names its client with
`@pytest.mark.compat(client="spark")` for the report.
"""

from __future__ import annotations

import os
import shlex

import pytest

from compat_tests import broker_kinds
from compat_tests import brokers as brokers_mod
from compat_tests import peer_findings
from compat_tests.clients import CLIENT_NAMES, NotSupportedByClient, make_client
from compat_tests.helpers import unique_name
from compat_tests.observe.plugin import ObservationPlugin
from compat_tests.report import MatrixReport, scenario_of

DEFAULT_BROKERS = "kafka,trafka"
DEFAULT_TIMEOUT_S = 90
# Every broker of the suite, Kafka's and Trafka's alike, runs with brokers.SUITE_SETTINGS
# (Kafka's own setting names); the suite's trafka brokers get them as `--set` flags
# (brokers.TRAFKA_SUITE_ARGS), before the `--trafka-arg`s.


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("compat", "Kafka compatibility suite")
    group.addoption("--broker", default=os.environ.get("COMPAT_BROKERS", DEFAULT_BROKERS),
                    help="comma-separated broker kinds: " + ", ".join(broker_kinds.KNOWN_KINDS)
                    + f" (env COMPAT_BROKERS, default {DEFAULT_BROKERS})")
    group.addoption("--clients", default=os.environ.get("COMPAT_CLIENTS", ",".join(CLIENT_NAMES)),
                    help="comma-separated client libraries (env COMPAT_CLIENTS, default all)")
    group.addoption("--trafka-arg", action="append", default=None,
                    help="extra argument for `python -m server serve` (repeatable; "
                    "env TRAFKA_ARGS, shell-quoted)")
    group.addoption("--no-peer-xfail", action="store_true",
                    default=bool(os.environ.get("COMPAT_NO_PEER_XFAIL")),
                    help="do not mark known peer-broker failures as xfail (to re-check them)")
    group.addoption("--peer-recheck", action="store_true",
                    default=bool(os.environ.get("COMPAT_PEER_RECHECK")),
                    help="run the known peer-broker failures (as non-strict xfails) instead of "
                    "reporting them from peer_findings unrun (env COMPAT_PEER_RECHECK)")


def _split(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "compat(client=NAME): names the client of a compat "
                            "scenario that has no `client` parameter (for the report matrix)")
    config.addinivalue_line("markers", "broker_kinds(*kinds): the broker kinds a scenario runs "
                            "against instead of --broker's (each when it, or its base kind "
                            "before the '-', is chosen): the cluster scenarios")
    config.addinivalue_line("markers", "source_kind(kind): the broker kind of a scenario's "
                            "second broker, the source it copies from (test_mirrormaker2.py)")
    for kind in _split(config.getoption("--broker")):
        if kind not in broker_kinds.KNOWN_KINDS:
            raise pytest.UsageError(f"--broker: unknown kind {kind!r}; known: "
                                    + ", ".join(broker_kinds.KNOWN_KINDS))
    for name in _split(config.getoption("--clients")):
        if name not in CLIENT_NAMES:
            raise pytest.UsageError(f"--clients: unknown client {name!r}; known: "
                                    + ", ".join(CLIENT_NAMES))
    # kafka-python 3.0 loads its JSON schemas with the deprecated importlib.resources API
    for message in ("read_text is deprecated", "open_text is deprecated"):
        config.addinivalue_line("filterwarnings", f"ignore:{message}:DeprecationWarning")
    if not config.pluginmanager.has_plugin("compat-report"):
        config.pluginmanager.register(MatrixReport(config), "compat-report")
    if not config.pluginmanager.has_plugin("compat-observe"):
        config.pluginmanager.register(ObservationPlugin(config), "compat-observe")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "broker_kind" in metafunc.fixturenames:
        kinds = _split(metafunc.config.getoption("--broker"))
        own = metafunc.definition.get_closest_marker("broker_kinds")
        if own is not None:
            # A scenario that needs a kind of its own (the 3-broker cluster) runs against it
            # when that kind, or the broker it is made of ("trafka"), is chosen.
            kinds = [k for k in own.args if k in kinds or k.split("-")[0] in kinds]
        metafunc.parametrize("broker_kind", kinds, ids=kinds)
    if "client_name" in metafunc.fixturenames:
        names = _split(metafunc.config.getoption("--clients"))
        metafunc.parametrize("client_name", names, ids=names)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    use_xfail = not config.getoption("--no-peer-xfail")
    # A known peer failure mostly fails by waiting out a client timeout: re-running the
    # 138 of them took half of CI's hour. By default they are reported from peer_findings
    # without running ("peer failure (not re-run)"); --peer-recheck runs them all again.
    recheck = config.getoption("--peer-recheck")
    for item in items:
        if not _is_compat(item):
            continue
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(DEFAULT_TIMEOUT_S))
        params = getattr(item, "callspec", None)
        kind = params.params.get("broker_kind") if params else None
        if not use_xfail or kind is None:
            continue
        scenario, client = scenario_of(item)
        reason = peer_findings.lookup(kind, scenario, client)
        if reason:
            item.add_marker(pytest.mark.xfail(strict=False, run=recheck, reason=f"peer failure: {reason}"))


def _is_compat(item: pytest.Item) -> bool:
    return "compat_tests" in item.nodeid.split("::")[0].replace("\\", "/").split("/")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    # A client library that cannot do the verb is a skip with that reason, never a broker
    # failure, even where the peer is expected to fail.
    if call.excinfo is not None and call.excinfo.errisinstance(NotSupportedByClient):
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0,
                           f"Skipped: {call.excinfo.value}")
        if hasattr(report, "wasxfail"):
            del report.wasxfail
    elif report.failed and _is_compat(item):
        for name in ("fresh_broker", "broker"):
            broker = getattr(item, "funcargs", {}).get(name)
            if broker is not None:
                report.sections.append((f"{broker.name} broker log (tail)", broker.log_tail()))
                break


# --------------------------------------------------------------------------- brokers


class BrokerPool:
    """One lazily started broker per kind for the whole session (or why it cannot run)."""

    def __init__(self, config: pytest.Config, root) -> None:
        self.root = root
        self.trafka_args = list(brokers_mod.TRAFKA_SUITE_ARGS) + list(config.getoption("--trafka-arg") or [])
        self.trafka_args += shlex.split(os.environ.get("TRAFKA_ARGS", ""))
        self.brokers: dict[str, brokers_mod.Broker] = {}
        self.unavailable: dict[str, BaseException] = {}
        self.fresh_count = 0

    def make(self, kind: str, label: str) -> brokers_mod.Broker:
        return broker_kinds.make_broker(kind, self.root / label, self.trafka_args)

    def get(self, kind: str) -> brokers_mod.Broker:
        if kind in self.unavailable:
            exc = self.unavailable[kind]
            if isinstance(exc, brokers_mod.BrokerUnavailable):
                pytest.skip(str(exc))
            pytest.fail(f"{kind} broker failed to start earlier in this session:\n{exc}",
                        pytrace=False)
        broker = self.brokers.get(kind)
        if broker is None:
            try:
                broker = self.make(kind, f"{kind}-shared")
                broker.start()
            except brokers_mod.BrokerUnavailable as exc:
                self.unavailable[kind] = exc
                pytest.skip(str(exc))
            except brokers_mod.BrokerFailed as exc:
                self.unavailable[kind] = exc
                pytest.fail(str(exc), pytrace=False)
            self.brokers[kind] = broker
        elif not broker.alive():
            # An earlier test killed it; that test already failed. Start again in place.
            broker.start()
        return broker

    def stop_all(self) -> None:
        for broker in self.brokers.values():
            broker.stop()


@pytest.fixture(scope="session")
def broker_pool(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    pool = BrokerPool(request.config, tmp_path_factory.mktemp("brokers"))
    yield pool
    pool.stop_all()


@pytest.fixture
def broker(broker_pool: BrokerPool, broker_kind: str):
    """The session's shared broker of this kind. Do not restart it: use `fresh_broker`."""
    b = broker_pool.get(broker_kind)
    yield b
    if not b.alive():
        pytest.fail(f"{b.name} broker died during the test:\n{b.log_tail()}", pytrace=False)


@pytest.fixture
def fresh_broker(broker_pool: BrokerPool, broker_kind: str):
    """A broker process of this kind for this test alone (restartable in place)."""
    if broker_kind == "external":
        yield broker_pool.get(broker_kind)
        return
    broker_pool.get(broker_kind)  # skip / fail fast the same way the shared one did
    broker_pool.fresh_count += 1
    b = broker_pool.make(broker_kind, f"{broker_kind}-fresh-{broker_pool.fresh_count}")
    try:
        b.start()
    except brokers_mod.BrokerFailed as exc:
        pytest.fail(str(exc), pytrace=False)
    yield b
    b.stop()


# --------------------------------------------------------------------------- clients


@pytest.fixture
def client(request: pytest.FixtureRequest, client_name: str, broker_kind: str):
    """The adapter of the client under test, bound to this test's broker."""
    target = request.getfixturevalue(
        "fresh_broker" if "fresh_broker" in request.fixturenames else "broker")
    adapter = make_client(client_name, target.bootstrap)
    yield adapter
    adapter.close()


@pytest.fixture
def setup_client(request: pytest.FixtureRequest, broker_kind: str):
    """kafka-python, for setup steps the client under test has no verb for (kcat admin)."""
    target = request.getfixturevalue(
        "fresh_broker" if "fresh_broker" in request.fixturenames else "broker")
    adapter = make_client("kafka-python", target.bootstrap)
    yield adapter
    adapter.close()


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    return unique_name(request.node.originalname.removeprefix("test_"))


@pytest.fixture
def group_name(request: pytest.FixtureRequest) -> str:
    return unique_name("g-" + request.node.originalname.removeprefix("test_"))

