"""The import contracts in pyproject.toml hold (import-linter): no import circles at any
depth, the rooms stacked (the command line on the applications on the broker on storage,
http_common and wire), the applications reaching the broker only as pyproject says, wire
and storage free of trio and sockets."""

import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def lint_imports(config: Path, cwd: Path) -> subprocess.CompletedProcess:
    exe = shutil.which("lint-imports")
    if exe is None:
        pytest.skip("import-linter is not installed (pip install -e '.[test]')")
    return subprocess.run([exe, "--config", str(config), "--no-cache"], cwd=cwd, capture_output=True, text=True,
                          env={"PYTHONPATH": str(cwd), "PATH": "/usr/bin:/bin"})


def test_import_contracts_hold():
    result = lint_imports(REPO / "pyproject.toml", REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout or "KEPT" in result.stdout


def acyclic_contract() -> dict:
    settings = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = [c for c in settings["contracts"] if c["type"] == "acyclic_siblings"]
    return {"roots": settings["root_packages"], **contract}


def test_every_room_is_under_the_acyclic_contract():
    contract = acyclic_contract()
    assert sorted(contract["ancestors"]) == sorted(contract["roots"])


def test_the_acyclic_contract_fails_on_a_new_circle(tmp_path):
    """The contract as pyproject.toml writes it, over a package whose subpackages import
    each other only through a function-level import: lint-imports fails and names it."""
    contract = acyclic_contract()
    package = tmp_path / "circle"
    (package / "low").mkdir(parents=True)
    (package / "high").mkdir()
    for init in (package, package / "low", package / "high"):
        (init / "__init__.py").write_text("")
    (package / "high" / "top.py").write_text("from circle.low import bottom\n")
    (package / "low" / "bottom.py").write_text("def later():\n    from circle.high import top\n")
    options = {k: v for k, v in contract.items() if k not in ("roots", "ancestors", "name", "type")}
    lines = ["[tool.importlinter]", 'root_packages = ["circle"]', "", "[[tool.importlinter.contracts]]",
             f'name = "{contract["name"]}"', f'type = "{contract["type"]}"', 'ancestors = ["circle"]']
    lines += [f"{key} = {value!r}" for key, value in options.items()]
    config = tmp_path / "pyproject.toml"
    config.write_text("\n".join(lines) + "\n")
    result = lint_imports(config, tmp_path)
    assert result.returncode != 0, result.stdout
    assert "No cycles are allowed in circle" in result.stdout
