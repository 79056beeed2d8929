"""The architecture page is true (issue 26 item 9): its diagrams and tables are generated from
the code and the import contracts at every build (docs/hooks/architecture.py), and what its prose
names exists.

The rooms and imports are found here without the generator's own walk (the folders under
``src/ledgermq`` and an ``ast`` scan of every import statement; the contracts with ``tomllib``),
so a room or an import the generator misses fails a test."""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
import tomllib
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pytest

from tests.docs.pages import DOCS, ROOT

if TYPE_CHECKING:
    from collections.abc import Iterator

SRC = ROOT / "src" / "ledgermq"
PAGE = DOCS / "architecture.md"


def _hook() -> ModuleType:
    path = DOCS / "hooks" / "architecture.py"
    spec = importlib.util.spec_from_file_location("docs_architecture_hook", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # as mkdocs loads a hook (its dataclasses need it)
    spec.loader.exec_module(module)
    return module


HOOK = _hook()


@pytest.fixture(scope="module")
def graph() -> Any:
    """The import graph, built once for the tests of this file (the hook builds it per page)."""
    return HOOK.build_graph("ledgermq")


def _top_rooms() -> dict[str, str]:
    """name -> label (``broker/``, ``errors.py``) of every public package and module directly
    under src/ledgermq, as the file system has them."""
    rooms = {}
    for path in SRC.iterdir():
        if path.name.startswith("_"):
            continue
        if path.is_dir() and (path / "__init__.py").exists():
            rooms[path.name] = f"{path.name}/"
        elif path.suffix == ".py":
            rooms[path.stem] = path.name
    return rooms


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement of ``body``, nested ones too (functions, classes, ``if TYPE_CHECKING``,
    ``try``), without walking the expressions: imports are statements."""
    for statement in body:
        yield statement
        for field in ("body", "orelse", "finalbody"):
            yield from _statements(getattr(statement, field, []))
        for handler in getattr(statement, "handlers", []):
            yield from _statements(handler.body)


def _imports_by_room() -> dict[str, set[str]]:
    """room -> the other top-level rooms its modules import, from every import statement."""
    rooms = _top_rooms()
    found: dict[str, set[str]] = {name: set() for name in rooms}
    for path in SRC.rglob("*.py"):
        source = path.relative_to(SRC).parts[0].removesuffix(".py")
        text = path.read_text()
        if source not in rooms or "ledgermq" not in text:
            continue
        for node in _statements(ast.parse(text).body):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module is not None:
                names = [node.module]
                if node.module == "ledgermq":
                    names = [f"ledgermq.{alias.name}" for alias in node.names]
            for name in names:
                parts = name.split(".")
                inside = parts[0] == "ledgermq" and len(parts) > 1 and parts[1] in rooms
                if inside and parts[1] != source:
                    found[source].add(parts[1])
    return found


def _rows(section: str) -> dict[str, list[str]]:
    """The generated table's rows: room label -> its cells after the first."""
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        if len(cells) >= 4 and re.fullmatch(r"`[\w.]+/?`", cells[0]):
            rows[cells[0].strip("`")] = cells[1:]
    return rows


def _table(section: str) -> dict[str, list[str]]:
    """The generated table's rows: room label -> the rooms of its ``imports`` column."""
    return {room: re.findall(r"`([\w.]+)`", cells[1]) for room, cells in _rows(section).items()}


def test_the_diagram_names_every_top_level_room(graph: Any) -> None:
    section = HOOK.rooms_section("ledgermq", graph)
    diagram = section.split("```mermaid", 1)[1].split("```", 1)[0]
    labels = set(re.findall(r'\["([^"]+)"\]', diagram))
    rooms = _top_rooms()
    assert len(rooms) > 10
    assert set(rooms.values()) - labels == set()


def test_every_room_has_a_floor_of_the_layers_contract_or_is_shown_on_none(graph: Any) -> None:
    """A room the layers contract leaves out is drawn apart, never dropped: the subgraphs hold
    every room exactly once."""
    diagram = HOOK.rooms_section("ledgermq", graph).split("```mermaid", 1)[1].split("```", 1)[0]
    nodes = re.findall(r'^\s+m_ledgermq_(\w+)\["', diagram, re.MULTILINE)
    assert sorted(nodes) == sorted(_top_rooms())
    layers = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    floors = next(c for c in layers["contracts"] if c["type"] == "layers")["layers"]
    assert diagram.count("subgraph ") >= len(floors)


def test_the_table_lists_exactly_the_imports_the_code_makes(graph: Any) -> None:
    table = _table(HOOK.rooms_section("ledgermq", graph))
    rooms = _top_rooms()
    imports = _imports_by_room()
    assert set(table) == set(rooms.values())
    for name, label in rooms.items():
        assert set(table[label]) == imports[name], label
    assert {"raft", "store", "net"} <= set(table["ledger/"])


def test_each_room_says_what_it_holds_in_its_own_words(graph: Any) -> None:
    """The table's second column is the first paragraph of the room's docstring."""
    rows = _rows(HOOK.rooms_section("ledgermq", graph))
    for name, label in _top_rooms().items():
        path = SRC / name / "__init__.py" if label.endswith("/") else SRC / label
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        # as a table cell shows it: inline code single-ticked, a pipe escaped
        first_line = doc.splitlines()[0].replace("``", "`").replace("|", "\\|")
        assert rows[label][0].startswith(first_line.strip()), label


def test_an_arrow_is_drawn_for_every_import_no_longer_path_implies() -> None:
    kept, implied = HOOK.reduce_arrows({("a", "b"), ("b", "c"), ("a", "c"), ("c", "d")})
    assert kept == {("a", "b"), ("b", "c"), ("c", "d")}
    assert implied == 1
    # a cycle keeps its arrows, and hides none of those that lead into it (broker.state and
    # broker.storage import each other: the service's arrows to both stay drawn)
    cycle = {("s", "x"), ("s", "y"), ("x", "y"), ("y", "x"), ("y", "z")}
    assert HOOK.reduce_arrows(cycle) == (cycle, 0)
    kept, implied = HOOK.reduce_arrows(cycle | {("s", "z"), ("t", "s"), ("t", "x")})
    assert kept == cycle | {("t", "s")}
    assert implied == 2


def test_a_package_inside_a_room_gets_its_own_diagram(graph: Any) -> None:
    section = HOOK.rooms_section("ledgermq.broker", graph)
    children = {
        p.name if p.is_dir() else p.stem
        for p in (SRC / "broker").iterdir()
        if not p.name.startswith("_") and (p.suffix == ".py" or (p / "__init__.py").exists())
    }
    assert set(_table(section)) == {
        f"{c}/" if (SRC / "broker" / c).is_dir() else f"{c}.py" for c in children
    }
    assert "subgraph" not in section  # no floor of the layers contract is inside a room


def test_the_walls_name_every_contract_of_pyproject() -> None:
    section = HOOK.walls_section()
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    for contract in contracts["contracts"]:
        assert contract["name"] in section
    for contract in contracts["contracts"]:
        if contract["type"] == "forbidden":
            row = next(line for line in section.splitlines() if contract["name"] in line)
            for module in contract["forbidden_modules"]:
                assert f"`{module.removeprefix('ledgermq.')}`" in row


def test_the_page_is_rendered_with_every_marker_filled_in() -> None:
    text = PAGE.read_text()
    markers = HOOK.MARKER.findall(text)
    assert ("rooms", "ledgermq") in markers
    assert ("walls", "") in markers
    rendered = HOOK.render(text)
    assert HOOK.MARKER.search(rendered) is None
    assert rendered.count("```mermaid") == sum(kind == "rooms" for kind, _ in markers)


@pytest.mark.parametrize(
    ("marker", "rule"),
    [
        ("<!-- generated: rooms ledgermq.nothing_here -->", "not a module"),
        ("<!-- generated: pictures -->", "unknown marker"),
    ],
)
def test_a_marker_for_something_gone_fails_the_build(marker: str, rule: str) -> None:
    with pytest.raises(ValueError, match=rule):
        HOOK.render(f"# Page\n\n{marker}\n")


def test_the_hook_lets_mkdocs_material_draw_mermaid() -> None:
    config: dict[str, Any] = {"mdx_configs": {}}
    HOOK.on_config(config)
    HOOK.on_config(config)  # twice: one fence
    fences = config["mdx_configs"]["pymdownx.superfences"]["custom_fences"]
    assert [(f["name"], f["class"]) for f in fences] == [("mermaid", "mermaid")]


_NAMED_PATH = re.compile(r"`((?:[a-z_]+/)+(?:[a-z_]+\.py)?|[a-z_]+\.py)`")


def test_every_module_path_the_prose_names_exists() -> None:
    """Paths such as `broker/remoting/door.py` are relative to src/ledgermq (the page says so);
    a package moved without the prose following fails here. (A bare `send.py` in a list under
    its package is not checked, a bare top-level module such as `errors.py` is.)"""
    text = PAGE.read_text()
    rooms = _top_rooms()
    named = {
        p
        for p in _NAMED_PATH.findall(text)
        if ("/" in p and p.split("/")[0] in rooms) or p in rooms.values()
    }
    assert len(named) > 40
    missing = sorted(p for p in named if not (SRC / p.rstrip("/")).exists())
    assert missing == []


def test_nothing_that_exists_is_still_to_come() -> None:
    """The page once said POP and end-transaction were 'to come'; each exists, and the page
    walks it."""
    text = PAGE.read_text()
    assert "to come" not in text
    headings = re.findall(r"^## (.+)$", text, re.MULTILINE)
    for topic in ("remoting door", "gRPC door", "Consuming", "Transactions", "Timers"):
        assert any(topic in heading for heading in headings), topic
    for operation in ("POP", "pull", "EndTransaction", "RecallMessage"):
        assert operation in text


def test_no_room_says_it_is_still_to_come() -> None:
    """A package's docstring is the first page of its room: what exists is not promised."""
    promising = [
        str(path.relative_to(SRC))
        for path in SRC.rglob("__init__.py")
        if "to come" in (ast.get_docstring(ast.parse(path.read_text())) or "")
    ]
    assert promising == []
