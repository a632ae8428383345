"""A repository's own Python files never run inside semo's processes (issue 21 #1).

`semo console` and `semo demo` start their engine in the background from the folder they run
in: the operator's repository. With `python -m`, that folder came first on `sys.path`, so a
committed `json.py` was imported into the engine, with every secret in its environment. Here
the folder holds `argparse.py`, `json.py` and `typing.py` that record who imported them and
then hand over to the real module (a stealthy attacker: the console looks normal).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.control.office import Console, Office, consoles, office_fixture

pytestmark = pytest.mark.timeout(120)

office = office_fixture()

PLANTED = ("argparse", "json", "typing")

#: a planted module: note the importing process and its secrets' names, then load the real one
MODULE = """
import os, sys
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "imported-" + __name__), "a") as note:
    note.write("%d %s\\n" % (os.getpid(), sorted(k for k in os.environ if k.startswith("SEMO"))))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
del sys.modules[__name__]
import importlib
sys.modules[__name__] = importlib.import_module(__name__)
"""


def plant(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in PLANTED:
        (folder / f"{name}.py").write_text(MODULE)


def imported(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in folder.glob("imported-*")}


def test_console_engine_imports_nothing_from_the_repository(office: Office) -> None:
    plant(office.folder)
    with consoles() as opened:
        console = Console(office, "console")
        opened.append(console)
        console.wait_for("ready")
        assert office.engine_pid() > 0  # the background engine runs
        assert imported(office.folder) == {}


def test_demo_engine_and_agents_import_nothing_from_their_folders(office: Office) -> None:
    plant(office.folder)
    workspace = office.folder / "state" / "semo" / "demo-workspace"
    for role in ("FE", "BE", "QA"):
        plant(workspace / role)  # an agent's own folder, where the demo agents start
    with consoles() as opened:
        console = Console(office, "demo", cols=120, rows=36)
        opened.append(console)
        console.wait_for("1 postgres")  # FE asked its question: engine and agents ran
        assert imported(office.folder) == {}
        for role in ("FE", "BE", "QA"):
            assert imported(workspace / role) == {}
    office.cleanup("--demo")
