"""The architecture page's diagrams and tables, derived from the code at every build of the site.

A mkdocs hook (``hooks:`` in ``mkdocs.yml``): ``on_page_markdown`` replaces each marker line
``<!-- generated: KIND [PACKAGE] -->`` of a page with what the program says today, so that the
picture of the rooms cannot go stale when a package moves:

- ``rooms PACKAGE``: a Mermaid diagram of the rooms of ``PACKAGE`` (its public subpackages and
  modules, found on disk, never listed here), grouped into the floors of pyproject.toml's
  import-linter ``layers`` contract, with an arrow for every import between two rooms that the
  code really makes (from grimp, the import graph ``lint-imports`` checks), then a table of each
  room's first docstring paragraph (what it holds) and its imports;
- ``walls``: every import-linter contract of pyproject.toml: the floors of the ``layers``
  contract and, for each ``forbidden`` contract, the rooms and what they may not import.

An unknown marker or a package that does not exist fails the build (mkdocs reports the
exception), so a page cannot keep a diagram of something that is gone.

``python docs/hooks/architecture.py [PACKAGE]`` prints the Markdown a ``rooms`` marker becomes
(``ledgermq`` when no package is named), for reading without building the site.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import re
import sys
import tomllib
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable

    from grimp import ImportGraph

__all__ = [
    "Contracts",
    "Wall",
    "floors_of",
    "imports_between",
    "on_config",
    "on_page_markdown",
    "read_contracts",
    "render",
    "rooms_of",
    "rooms_section",
    "summary",
    "walls_section",
]

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = ROOT / "pyproject.toml"
MARKER = re.compile(r"^<!-- generated: (\w+)(?: ([\w.]+))? -->$", re.MULTILINE)
_NOTE = (
    '!!! note "Generated"\n    The diagram and the tables of this section are derived from the '
    "code and from pyproject.toml's import contracts at every build of the site "
    "(`docs/hooks/architecture.py`); move a package and they follow.\n"
)


# ---------------------------------------------------------------------------------- contracts
@dataclasses.dataclass(frozen=True)
class Wall:
    """One ``forbidden`` contract: ``sources`` may not import ``forbidden``."""

    name: str
    sources: tuple[str, ...]
    forbidden: tuple[str, ...]
    indirect_allowed: bool
    """True when only the sources' own imports count (``allow_indirect_imports``)."""
    ignored: tuple[str, ...]
    """The contract's ``ignore_imports``: the named exceptions."""


@dataclasses.dataclass(frozen=True)
class Contracts:
    """pyproject.toml's import-linter contracts, as the diagram needs them."""

    root: str
    """The ``root_package``."""
    layers_name: str
    floors: tuple[tuple[str, ...], ...]
    """The ``layers`` contract's layers, top floor first, each a tuple of module names (siblings
    separated by ``|`` or ``:``; the parentheses of an optional layer removed)."""
    layers_ignored: tuple[str, ...]
    walls: tuple[Wall, ...]
    others: tuple[tuple[str, str], ...]
    """Contracts of any other type, as (type, name)."""


def _layer(raw: str) -> tuple[str, ...]:
    parts = re.split(r"[|:]", raw)
    return tuple(p.strip().removeprefix("(").removesuffix(")").strip() for p in parts)


def read_contracts(pyproject: Path = PYPROJECT) -> Contracts:
    """The contracts ``lint-imports`` checks, read from the same table it reads."""
    config = tomllib.loads(pyproject.read_text())["tool"]["importlinter"]
    layers_name = ""
    floors: tuple[tuple[str, ...], ...] = ()
    layers_ignored: tuple[str, ...] = ()
    walls: list[Wall] = []
    others: list[tuple[str, str]] = []
    for contract in config["contracts"]:
        kind, name = contract["type"], contract["name"]
        if kind == "layers" and not floors:
            layers_name = name
            floors = tuple(_layer(raw) for raw in contract["layers"])
            layers_ignored = tuple(contract.get("ignore_imports", ()))
        elif kind == "forbidden":
            walls.append(
                Wall(
                    name=name,
                    sources=tuple(contract["source_modules"]),
                    forbidden=tuple(contract["forbidden_modules"]),
                    indirect_allowed=bool(contract.get("allow_indirect_imports", False)),
                    ignored=tuple(contract.get("ignore_imports", ())),
                )
            )
        else:
            others.append((kind, name))
    return Contracts(
        root=config["root_package"],
        layers_name=layers_name,
        floors=floors,
        layers_ignored=layers_ignored,
        walls=tuple(walls),
        others=tuple(others),
    )


# ---------------------------------------------------------------------------------- rooms
def build_graph(root: str) -> ImportGraph:
    """The import graph of ``root``, as ``lint-imports`` builds it (grimp, imports under
    ``TYPE_CHECKING`` included, as the contracts count them)."""
    import grimp  # noqa: PLC0415 - only a build of the site needs it

    return grimp.build_graph(root, cache_dir=None)


def rooms_of(graph: ImportGraph, package: str) -> list[str]:
    """The rooms of ``package``: its subpackages and modules, private ones (``_name``,
    ``__main__``) left out, sorted. Raises ``ValueError`` for a package the code does not have."""
    if package not in graph.modules:
        raise ValueError(f"the architecture page names {package!r}, which is not a module")
    children = graph.find_children(package)
    if not children:
        raise ValueError(f"the architecture page names {package!r}, which holds no modules")
    return sorted(c for c in children if not c.rsplit(".", 1)[1].startswith("_"))


def _room(module: str, package: str) -> str | None:
    """The room of ``package`` that ``module`` is in, None when it is outside (or the package's
    own ``__init__``)."""
    if not module.startswith(package + "."):
        return None
    return package + "." + module[len(package) + 1 :].split(".", 1)[0]


def imports_between(graph: ImportGraph, package: str) -> Counter[tuple[str, str]]:
    """(importer room, imported room) -> how many module-to-module imports, for every import
    between two different rooms of ``package`` (private rooms count as their own)."""
    found: Counter[tuple[str, str]] = Counter()
    for module in graph.find_descendants(package):
        source = _room(module, package)
        for imported in graph.find_modules_directly_imported_by(module):
            target = _room(imported, package)
            if source is not None and target is not None and source != target:
                found[(source, target)] += 1
    return found


def imports_outside(graph: ImportGraph, package: str, root: str) -> dict[str, set[str]]:
    """room of ``package`` -> the top-level rooms of ``root`` outside ``package`` it imports."""
    found: dict[str, set[str]] = {}
    for module in graph.find_descendants(package):
        source = _room(module, package)
        for imported in graph.find_modules_directly_imported_by(module):
            target = _room(imported, root)
            if source is not None and target is not None and _room(imported, package) is None:
                found.setdefault(source, set()).add(target)
    return found


def floors_of(contracts: Contracts, rooms: Iterable[str]) -> list[tuple[str, list[str]]]:
    """The rooms grouped by the floor of the ``layers`` contract they are on, top floor first,
    as (floor title, rooms); rooms on no floor come last, under their own title. A floor that
    names no room of these (a nested package's diagram) is left out."""
    left = set(rooms)
    out: list[tuple[str, list[str]]] = []
    for number, floor in enumerate(contracts.floors, start=1):
        here = [r for r in sorted(left) if any(r == m or m.startswith(r + ".") for m in floor)]
        if here:
            out.append((f"floor {number}", here))
            left -= set(here)
    if left:
        title = "on no floor of the layers contract" if out else "rooms"
        out.append((title, sorted(left)))
    return out


def reduce_arrows(arrows: Iterable[tuple[str, str]]) -> tuple[set[tuple[str, str]], int]:
    """The arrows worth drawing: ``a -> c`` is left out when a longer path ``a -> ... -> b ->
    ... -> c`` goes through a room ``b`` outside the cycles of ``a`` and ``c`` (if any), so the
    picture shows the order, not a thicket. Arrows inside a cycle (rooms that import each other,
    directly or not) are all kept, and so is every arrow into a cycle from outside it: a cycle
    must not hide the arrows that lead to it. Returns the arrows kept and how many were left
    out."""
    edges = set(arrows)
    after: dict[str, set[str]] = {}
    for a, b in edges:
        after.setdefault(a, set()).add(b)

    def reach(start: str) -> set[str]:
        seen: set[str] = set()
        todo = [start]
        while todo:
            for nxt in after.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    rooms = {room for edge in edges for room in edge}
    reaches = {room: reach(room) for room in rooms}

    def cycle(room: str) -> set[str]:
        return {room} | {other for other in reaches[room] if room in reaches[other]}

    def implied(a: str, c: str) -> bool:
        ends = cycle(a) | cycle(c)
        return any(c in reaches[b] for b in reaches[a] - ends)

    kept = {(a, c) for a, c in edges if not implied(a, c)}
    return kept, len(edges) - len(kept)


# ---------------------------------------------------------------------------------- Markdown
def _id(module: str) -> str:
    return "m_" + module.replace(".", "_")


def _label(graph: ImportGraph, module: str) -> str:
    """``broker/`` for a package, ``errors.py`` for a module, as a newcomer finds them."""
    tail = module.rsplit(".", 1)[1]
    return f"{tail}/" if graph.find_children(module) else f"{tail}.py"


def mermaid(graph: ImportGraph, package: str, contracts: Contracts) -> tuple[str, int, int]:
    """The Mermaid diagram of ``package``'s rooms; also how many arrows it draws and how many
    it leaves out as implied by a longer path."""
    rooms = rooms_of(graph, package)
    shown = set(rooms)
    arrows = {pair for pair in imports_between(graph, package) if set(pair) <= shown}
    kept, implied = reduce_arrows(arrows)
    lines = ["```mermaid", "flowchart TB"]
    groups = floors_of(contracts, rooms)
    for number, (title, members) in enumerate(groups):
        boxed = len(groups) > 1  # one group (a package below the floors) needs no box
        if boxed:
            lines.append(f'  subgraph f{number}["{title}"]')
        lines += [f'    {_id(r)}["{_label(graph, r)}"]' for r in members]
        if boxed:
            lines.append("  end")
    lines += [f"  {_id(a)} --> {_id(b)}" for a, b in sorted(kept)]
    lines.append("```")
    return "\n".join(lines), len(kept), implied


def _source(module: str) -> Path:
    """The file of ``module`` (a package's ``__init__.py``), found from where its root package
    is installed, without importing anything below the root."""
    root, *rest = module.split(".")
    spec = importlib.util.find_spec(root)
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"{root!r} is not an installed package")
    path = Path(next(iter(spec.submodule_search_locations)), *rest)
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def summary(module: str) -> str:
    """The first paragraph of ``module``'s docstring, as one Markdown table cell: what the room
    says it holds, kept true where the code is."""
    doc = ast.get_docstring(ast.parse(_source(module).read_text())) or ""
    text = " ".join(doc.split("\n\n", 1)[0].split())
    return text.replace("``", "`").replace("|", "\\|") or "—"


def _short(module: str, package: str) -> str:
    return module.removeprefix(package + ".")


def rooms_section(package: str, graph: ImportGraph | None = None) -> str:
    """What a ``rooms PACKAGE`` marker becomes: the diagram and each room's imports."""
    contracts = read_contracts()
    graph = graph if graph is not None else build_graph(contracts.root)
    diagram, drawn, implied = mermaid(graph, package, contracts)
    between = imports_between(graph, package)
    outside = imports_outside(graph, package, contracts.root) if package != contracts.root else {}
    rooms = rooms_of(graph, package)
    lines = [
        _NOTE,
        diagram,
        "",
        (
            f"An arrow A → B: a module of room A imports one of room B. {drawn} arrows are drawn; "
            f"{implied} more are left out because a longer path already shows them (A → B → C "
            "hides A → C). The table has them all."
        ),
        "",
    ]
    head = "| room | what it holds (its docstring) | imports | imported by |"
    rule = "|---|---|---|---|"
    if outside:
        head, rule = head + f" outside `{_short(package, contracts.root)}` |", rule + "---|"
    lines += [head, rule]
    for room in rooms:
        uses = sorted(b for a, b in between if a == room)
        used_by = sorted(a for a, b in between if b == room)
        row = [
            f"`{_label(graph, room)}`",
            summary(room),
            ", ".join(f"`{_short(m, package)}`" for m in uses) or "—",
            ", ".join(f"`{_short(m, package)}`" for m in used_by) or "—",
        ]
        if outside:
            row.append(
                ", ".join(f"`{_short(m, contracts.root)}`" for m in sorted(outside.get(room, ())))
                or "—"
            )
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def _modules(names: Iterable[str], root: str) -> str:
    """``a.b, c`` as the page writes them: backticked, the root package's prefix left out (an
    ignored import ``x -> y`` on both sides)."""
    return ", ".join(
        "`" + " → ".join(_short(side.strip(), root) for side in n.split("->")) + "`" for n in names
    )


def walls_section(contracts: Contracts | None = None) -> str:
    """What a ``walls`` marker becomes: every contract of pyproject.toml, in words."""
    contracts = contracts if contracts is not None else read_contracts()
    root = contracts.root
    lines = [
        (
            f"**{contracts.layers_name}** (`layers`): a room may import only the floors below "
            "its own; rooms on one floor do not import each other. Top floor first:"
        ),
        "",
    ]
    lines += [f"{n}. {_modules(floor, root)}" for n, floor in enumerate(contracts.floors, 1)]
    if contracts.layers_ignored:
        lines += ["", "The named exceptions: " + _modules(contracts.layers_ignored, root) + "."]
    lines += [
        "",
        (
            "The walls (`forbidden` contracts): the rooms on the left may not import those on "
            "the right; *direct* means that only their own imports count (an import through "
            "another room is allowed)."
        ),
        "",
        "| contract | these rooms | may not import |",
        "|---|---|---|",
    ]
    for wall in contracts.walls:
        name = wall.name + (" (*direct*)" if wall.indirect_allowed else "")
        if wall.ignored:
            name += "; exceptions: " + _modules(wall.ignored, root)
        lines.append(
            f"| {name} | {_modules(wall.sources, root)} | {_modules(wall.forbidden, root)} |"
        )
    for kind, name in contracts.others:
        lines += ["", f"- {name} (`{kind}`)"]
    return "\n".join(lines) + "\n"


def render(markdown: str) -> str:
    """``markdown`` with every marker replaced by what it stands for. Raises ``ValueError`` for a
    marker this hook does not know."""
    graph: list[ImportGraph] = []

    def replace(marker: re.Match[str]) -> str:
        kind, package = marker.group(1), marker.group(2)
        if kind == "walls" and package is None:
            return walls_section()
        if kind == "rooms" and package is not None:
            if not graph:
                graph.append(build_graph(read_contracts().root))
            return rooms_section(package, graph[0])
        raise ValueError(f"unknown marker {marker.group(0)!r} (rooms PACKAGE, or walls)")

    return MARKER.sub(replace, markdown)


def on_config(config: Any) -> Any:
    """mkdocs hook: let superfences pass ```` ```mermaid ```` blocks to mkdocs-material, which
    draws them (set here rather than in mkdocs.yml, whose ``!!python/name`` tag plain YAML readers
    such as the docs tests cannot load)."""
    from pymdownx.superfences import fence_code_format  # type: ignore[import-untyped]  # noqa: PLC0415

    settings = config["mdx_configs"].setdefault("pymdownx.superfences", {})
    fences = settings.setdefault("custom_fences", [])
    if not any(fence.get("name") == "mermaid" for fence in fences):
        fences.append({"name": "mermaid", "class": "mermaid", "format": fence_code_format})
    return config


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """mkdocs hook: fill in the markers of a page (the others pass through unchanged)."""
    return render(markdown) if MARKER.search(markdown) else markdown


if __name__ == "__main__":
    sys.stdout.write(rooms_section(sys.argv[1] if len(sys.argv) > 1 else read_contracts().root))
