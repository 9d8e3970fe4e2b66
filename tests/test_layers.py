"""Layering, checked by reading the source (DESIGN §1): data flows down, and each layer
imports only the layers below it.

The walk is over the AST, so it sees every import: at module level, inside functions, and
under ``if TYPE_CHECKING`` (a type-only import is still knowledge of the layer above). For
the protocol layer the check is transitive through trikafka's own modules: a protocol module
may not reach trio by way of a helper module either. Parent packages' ``__init__`` files
are not followed — ``trikafka/__init__.py`` re-exports the broker by design.

Two checks work together: ``LAYERS`` orders every module (a module imports its own layer and
the ones below, never one above: ``test_no_import_runs_up_a_layer``), and ``RULES`` keeps
siblings apart and names what a package must never reach (for ``broker.py`` and ``web/``,
transitively: the broker reaches its HTTP server and nothing above itself, not the console).
``test_no_two_modules_import_each_other`` finds import circles.

Packages that do not exist yet are simply empty here; the rules wait for them.
"""

from __future__ import annotations

import ast
import warnings
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import trikafka

PACKAGE_DIR = Path(trikafka.__file__).parent
ROOT = PACKAGE_DIR.parent

#: Everything above the four lower layers: no lower layer may import these.
UPPER = (
    "trikafka.server",
    "trikafka.web",
    "trikafka.broker",
    "trikafka.cluster",
    "trikafka.cli",
    "trikafka.testing",
    "trikafka.client",
    "trikafka.commands",
    "trikafka.console",
    "trikafka.rest",
    "trikafka.spark",
)

#: The edges: how people and programs use the broker (DESIGN §2). Nothing below them imports one.
EDGE_PACKAGES = (
    "trikafka.cli",
    "trikafka.client",
    "trikafka.commands",
    "trikafka.console",
    "trikafka.rest",
    "trikafka.spark",
    "trikafka.testing",
)

#: package → imports it must never make (a prefix matches the module and its children).
RULES: dict[str, tuple[str, ...]] = {
    "trikafka.protocol": (
        "trio",
        "trio_util",
        "socket",
        "trikafka.network",
        "trikafka.log",
        "trikafka.coordinator",
        *UPPER,
    ),
    "trikafka.network": ("trikafka.log", "trikafka.coordinator", *UPPER),
    "trikafka.log": ("trikafka.network", "trikafka.coordinator", *UPPER),
    # Each coordinator gets its settings record (coordinator/settings.py) from the wiring, never
    # the broker's config: nothing in coordinator/ knows trikafka.config.
    "trikafka.coordinator": ("trikafka.network", "trikafka.config", *UPPER),
    # TLS settings, SASL mechanisms and principals: fed bytes and settings by the connection,
    # never a stream; the network enters it, not the other way round.
    "trikafka.security": (
        "trio", "trio_util", "socket", "trikafka.network", "trikafka.log", "trikafka.coordinator",
        *UPPER,
    ),
    # The schema registry's core: parsing, canonical forms, compatibility rules, the fold of
    # ``_schemas`` — fed the log partition it stores in, like a coordinator, never importing
    # the log; its HTTP routes are an edge (trikafka.web).
    "trikafka.registry": (
        "trio", "trio_util", "socket", "trikafka.network", "trikafka.log", "trikafka.coordinator",
        "trikafka.security", *UPPER,
    ),
    # The sans-IO halves of the network layer: the connection's state machine and the values
    # it answers with are fed bytes, never a stream.
    "trikafka.network.connection_state": ("trio", "trio_util", "socket", "outcome"),
    "trikafka.network.responses": ("trio", "trio_util", "socket", "outcome"),
    # The cluster builds brokers from the layers below (its in-memory transport is
    # trikafka.network.memory); it uses no edge: clients, the CLI, Spark, web, testing.
    "trikafka.cluster": ("trikafka.web", *EDGE_PACKAGES),
    # The web layer is the broker's own HTTP server and /metrics, over the server's state:
    # it knows neither the broker that runs it nor the console mounted on it from an edge.
    "trikafka.web": ("trikafka.broker", "trikafka.cluster", *EDGE_PACKAGES),
    # broker.py runs what server/wiring.py builds and the HTTP server it owns (web/); the
    # console and every other edge are wired in from outside (the CLI, a test).
    "trikafka.broker": ("trikafka.cluster", *EDGE_PACKAGES),
}

#: Rules that also hold for everything a module reaches through trikafka's own modules.
TRANSITIVE = {
    "trikafka.protocol",
    "trikafka.network.connection_state",
    "trikafka.network.responses",
    "trikafka.web",
    "trikafka.broker",
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(PACKAGE_DIR.rglob("*.py"))}


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _package_of(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


@cache
def _imports(module: str) -> frozenset[str]:
    """Every module name ``module`` imports, relative imports resolved."""
    path = _modules()[module]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.update(_import_targets(module, path, node))
    return frozenset(found)


def _import_target(module: str, path: Path, node: ast.ImportFrom) -> str:
    """The module a ``from ... import`` names, relative imports resolved."""
    if not node.level:
        return node.module or ""
    base = _package_of(module, path)
    for _ in range(node.level - 1):
        base = base.rpartition(".")[0]
    return f"{base}.{node.module}" if node.module else base


def _import_targets(module: str, path: Path, node: ast.Import | ast.ImportFrom) -> list[str]:
    """Every module one import statement imports: ``from pkg import mod`` the submodule too."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    target = _import_target(module, path, node)
    return [target, *(f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in _modules())]


def _reachable(module: str) -> Iterator[tuple[str, str]]:
    """(importing module, imported name) for everything reachable through trikafka modules."""
    seen = {module}
    stack = [module]
    while stack:
        current = stack.pop()
        for name in _imports(current):
            yield current, name
            if name in _modules() and name not in seen and not _is_ancestor(name, module):
                seen.add(name)
                stack.append(name)


def _is_ancestor(package: str, module: str) -> bool:
    return module.startswith(package + ".")


def _violations(package: str, forbidden: tuple[str, ...]) -> list[str]:
    problems = []
    for module in _modules():
        if not _under(module, package):
            continue
        if package in TRANSITIVE:
            edges = list(_reachable(module))
        else:
            edges = [(module, name) for name in _imports(module)]
        for importer, name in edges:
            for prefix in forbidden:
                if _under(name, prefix):
                    via = "" if importer == module else f" (via {importer})"
                    problems.append(f"{module} imports {name}{via}")
    return sorted(set(problems))


def test_the_walk_sees_the_package():
    """Guard against a vacuous pass: the layers that exist today are found and parsed."""
    modules = _modules()
    assert "trikafka.protocol.framing" in modules
    assert "trikafka.network.connection" in modules
    assert "trikafka.network.connection_state" in modules
    assert "trikafka.errors" in _imports("trikafka.protocol.framing")
    assert "trio" in _imports("trikafka.network.connection")
    # Relative imports resolve, and TYPE_CHECKING imports are seen.
    assert "trikafka.network.processor" in _imports("trikafka.network.acceptor")


def test_layers_import_only_downwards():
    problems = {package: _violations(package, forbidden) for package, forbidden in RULES.items()}
    assert problems == {package: [] for package in RULES}


def test_protocol_is_sans_io():
    """Nothing in protocol/ reaches trio or sockets, even through a helper module."""
    assert _violations("trikafka.protocol", ("trio", "socket", "select", "selectors")) == []


# --- the layer order ---------------------------------------------------------------------------

#: Every module's layer, lowest first (DESIGN §2, docs/architecture.md §1). A module may import
#: its own layer and the ones below it, never one above; siblings in one layer are kept apart
#: by RULES. The package root (``trikafka/__init__.py``, lazy re-exports) is outside the order.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "foundation",
        (
            "trikafka.lazy_exports",
            "trikafka._version",
            "trikafka.errors",
            "trikafka.clock",
            "trikafka.config.properties",
            "trikafka.config.topics",
            "trikafka.config.groups",
            "trikafka.config.racks",
            "trikafka.config.share",
            "trikafka.config.kafka_keys",
            "trikafka.config.kafka_versions_data",
            "trikafka.config.kafka_versions",
            "trikafka.config.fields",
            "trikafka.config.client_metrics",
            "trikafka.config.resources",
        ),
    ),
    ("protocol", ("trikafka.protocol",)),
    ("security", ("trikafka.security",)),
    ("configuration", ("trikafka.config", "trikafka.metrics", "trikafka.otlp")),  # config.broker and the package
    (
        "network, storage, coordination",
        ("trikafka.network", "trikafka.log", "trikafka.coordinator", "trikafka.registry"),
    ),
    ("server", ("trikafka.server",)),
    ("web", ("trikafka.web",)),
    ("broker", ("trikafka.broker",)),
    ("cluster", ("trikafka.cluster",)),
    ("edges", (*EDGE_PACKAGES, "trikafka.output", "trikafka.__main__")),
)


def _rank(module: str) -> int | None:
    for rank, (_, prefixes) in enumerate(LAYERS):
        if any(_under(module, prefix) for prefix in prefixes):
            return rank
    return None


def _upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """``importer imports imported (layer → higher layer)`` for each import that runs up."""
    problems = []
    for module, names in graph.items():
        low = _rank(module)
        for name in names:
            high = _rank(name)
            if low is not None and high is not None and high > low:
                problems.append(f"{module} imports {name} ({LAYERS[low][0]} → {LAYERS[high][0]})")
    return sorted(problems)


def test_every_module_has_a_layer():
    """A new top-level module or package must be placed in LAYERS, not slip past the order."""
    assert [module for module in _modules() if module != "trikafka" and _rank(module) is None] == []


def test_the_order_check_sees_an_import_running_up():
    """Guard against a vacuous pass of the rule below."""
    assert _upward_imports({"trikafka.broker": {"trikafka.console.app"}}) == [
        "trikafka.broker imports trikafka.console.app (broker → edges)"
    ]
    assert _upward_imports({"trikafka.web.metrics": {"trikafka.server.kafka_apis"}}) == []
    assert _rank("trikafka.server.replica.replica_manager") < _rank("trikafka.web.server") < _rank("trikafka.broker")


def test_no_import_runs_up_a_layer():
    assert _upward_imports(_graph()) == []


def test_the_broker_imports_only_the_http_server_it_owns():
    """broker.py reaches web/ (its HTTP server and /metrics) and nothing above itself, not
    even through a module it imports; the console is mounted from an edge."""
    imported = _imports("trikafka.broker")
    assert any(_under(name, "trikafka.web") for name in imported)  # not vacuous
    reached = {name for _, name in _reachable("trikafka.broker")}
    assert sorted(n for n in reached if _under(n, "trikafka.console") or _rank(n) == len(LAYERS) - 1) == []


def _binds_all(tree: ast.Module) -> bool:
    for node in tree.body:
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            targets = [node.target]
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            return True
    return False


def _top_level_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()

    def visit(statements: list[ast.stmt]) -> None:
        for node in statements:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    for leaf in ast.walk(target):
                        if isinstance(leaf, ast.Name):
                            names.add(leaf.id)
            elif isinstance(node, ast.Import | ast.ImportFrom):
                for alias in node.names:
                    names.add((alias.asname or alias.name).partition(".")[0])
            elif isinstance(node, ast.If | ast.Try | ast.With):
                visit(node.body)
                visit(getattr(node, "orelse", []))
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)
                visit(getattr(node, "finalbody", []))

    visit(tree.body)
    return names


def _declared_all(tree: ast.Module) -> list[str] | None:
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                try:
                    return list(ast.literal_eval(node.value))
                except ValueError:
                    return None
    return None


def test_every_module_declares_all():
    missing = []
    for path in _modules().values():
        if path.name == "__main__.py":
            continue
        if not _binds_all(ast.parse(path.read_text(encoding="utf-8"))):
            missing.append(str(path.relative_to(ROOT)))
    assert missing == []


def test_every_name_in_all_is_defined():
    undefined = []
    for module, path in _modules().items():
        if path.name == "__main__.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        declared = _declared_all(tree)
        if declared is None:
            continue  # built dynamically; test_public_api imports the public ones
        defined = _top_level_names(tree)
        undefined += [f"{module}.{name}" for name in declared if name not in defined]
        duplicates = {name for name in declared if declared.count(name) > 1}
        undefined += [f"{module}.{name} (listed twice)" for name in sorted(duplicates)]
    assert undefined == []


# --- cycles, edges, sizes ----------------------------------------------------------------------


def _graph() -> dict[str, set[str]]:
    """module → the trikafka modules it imports (package ``__init__`` re-exports excluded:
    importing ``trikafka.client`` is importing its public names, not a module of it)."""
    modules = _modules()
    return {
        module: {name for name in _imports(module) if name in modules and name != module}
        for module in modules
    }


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for child in sorted(graph[node]):
            if child not in index:
                visit(child)
                low[node] = min(low[node], low[child])
            elif child in on_stack:
                low[node] = min(low[node], index[child])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _without_package_inits(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """A package's ``__init__`` that re-exports its children is not a cycle with them."""
    packages = {m for m, p in _modules().items() if p.name == "__init__.py"}
    return {
        module: {
            name
            for name in names
            if not (name in packages and _is_ancestor(name, module))
            and not (module in packages and _is_ancestor(module, name))
        }
        for module, names in graph.items()
    }


def test_cycle_finder_finds_a_cycle():
    """Guard against a vacuous pass of the rule below."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_two_modules_import_each_other():
    """Not directly, not in a loop, not even for type checking or inside a function: a pair
    of modules that need each other is one module, or two with a third they both use."""
    assert _cycles(_without_package_inits(_graph())) == []


#: The edge packages: how people and programs use the broker. Each uses the others only
#: through their public names (the package itself), never a module inside them.
EDGES = EDGE_PACKAGES


def _edge_of(module: str) -> str | None:
    return next((edge for edge in EDGES if _under(module, edge)), None)


def test_edges_use_each_other_only_through_public_names():
    problems = []
    for module in _modules():
        edge = _edge_of(module)
        if edge is None:
            continue
        for name in _imports(module):
            other = _edge_of(name)
            if other is not None and other != edge and name != other:
                problems.append(f"{module} imports {name} (use {other})")
    assert problems == []


#: Sizes are a smell, not a gate: a file or class past these is listed as a warning in the test
#: summary, to be read, never to be split to fit. Files follow seams (a long file that is one
#: concept beats two halves that call each other); circles and layer breaks fail, sizes do not.
MAX_FILE_LINES = 500
MAX_CLASS_LINES = 300


class SizeSmell(UserWarning):
    """A file or class past the sizes above: worth a look, not a failure."""


def _oversized(max_file_lines: int, max_class_lines: int) -> list[str]:
    too_long = []
    for module, path in _modules().items():
        source = path.read_text(encoding="utf-8")
        lines = len(source.splitlines())
        if lines > max_file_lines:
            too_long.append(f"{module}: {lines} lines")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ClassDef):
                length = node.end_lineno - node.lineno + 1
                if length > max_class_lines:
                    too_long.append(f"{module}.{node.name}: class of {length} lines")
    return too_long


def test_long_files_and_classes_are_reported_not_refused():
    assert _oversized(1, 1)  # the walk sees every file and class: not vacuous
    too_long = _oversized(MAX_FILE_LINES, MAX_CLASS_LINES)
    if too_long:
        warnings.warn(SizeSmell("long (a smell to read, not a gate): " + "; ".join(too_long)), stacklevel=1)


#: What only ``trikafka/server/wiring.py`` builds: a Broker and a cluster node are wired in
#: one place, so a new store or API family cannot reach one of them and miss the other.
WIRED_ONCE = frozenset(
    {"ApiContext", "KafkaApis", "RequestHandlerPool", "SocketServer", "GroupCoordinator", "TransactionCoordinator"}
)


def _constructions(tree: ast.AST) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            if name in WIRED_ONCE:
                found.add(name)
    return found


def test_a_broker_is_wired_in_one_place():
    assert _constructions(ast.parse("x = KafkaApis(context, [])")) == {"KafkaApis"}  # not vacuous
    built = {
        module: sorted(found)
        for module, path in _modules().items()
        if module != "trikafka.server.wiring"
        and (found := _constructions(ast.parse(path.read_text(encoding="utf-8"))))
    }
    assert built == {}
    assert _constructions(ast.parse(_modules()["trikafka.server.wiring"].read_text())) == WIRED_ONCE


# --- lazy entry points: what is imported before anything is asked for -------------------------
#
# pytest imports the plugin in every run where trikafka is installed, and ``python -m trikafka
# --help`` should answer at once; a broker without ``metrics.port``/``--ui`` serves no web
# console. So these modules' import — everything reached through imports that run when a
# module is imported — may not reach the names on their right. An import inside a function or
# under ``if TYPE_CHECKING`` runs later (or never) and is not followed; ``from pkg import
# Name`` through a package's lazy ``_LAZY`` table (PEP 562 ``__getattr__``) follows the table.
# tests/test_startup_imports.py checks the same in fresh interpreters.

_WEB_STACK = ("hypercorn", "starlette", "anyio", "jinja2", "prometheus_client")
_BROKER_PARTS = (
    "trikafka.broker",
    "trikafka.server",
    "trikafka.cluster",
    "trikafka.log",
    "trikafka.coordinator",
    "trikafka.network",
    "trikafka.web",
)

LAZY_ENTRY_POINTS: dict[str, tuple[str, ...]] = {
    "trikafka": (*_BROKER_PARTS, "trikafka.client", "trikafka.testing", "trio", *_WEB_STACK),
    "trikafka.testing.pytest_plugin": (*_BROKER_PARTS, "trikafka.client", "trio", *_WEB_STACK),
    "trikafka.cli": (*_BROKER_PARTS, "trikafka.testing", "trikafka.client", "trio", *_WEB_STACK),
    "trikafka.__main__": (*_BROKER_PARTS, "trikafka.testing", "trikafka.client", "trio", *_WEB_STACK),
    # The commands run on the client: they never load the broker.
    "trikafka.commands.parser": (*_BROKER_PARTS, "trikafka.testing", *_WEB_STACK),
    # The broker: the web server, the console and Spark only when configured; each API family
    # (server/apis/) when one of its APIs is first asked for (server/api_table.py); the schema
    # registry's schema libraries when a schema is first parsed; the file log with a data
    # directory, the coordinators and the schema registry on first use (server/wiring.py),
    # crc32c (importlib.metadata) on the first record batch (protocol/crc.py).
    "trikafka.broker": (
        *_WEB_STACK,
        "trikafka.log.file",
        "trikafka.coordinator.group_coordinator",
        "trikafka.coordinator.transactions",
        "trikafka.coordinator.share",
        "trikafka.server.share_dlq",
        "trikafka.registry.service",
        "trikafka.registry.validation",
        "crc32c",
        "importlib.metadata",
        "trikafka.server.apis",
        "fastavro",
        "jsonschema",
        "google.protobuf",
        "trikafka.console",
        "trikafka.web.metrics",
        "trikafka.spark",
        "pyspark",
        "trikafka.testing",
        "trikafka.client",
    ),
}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


@cache
def _lazy_table(package: str) -> dict[str, str]:
    """A package's ``_LAZY`` table (public name → module), or {}."""
    path = _modules().get(package)
    if path is None or path.name != "__init__.py":
        return {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "_LAZY" for t in node.targets
        ):
            return dict(ast.literal_eval(node.value))
    return {}


@cache
def _eager_imports(module: str) -> frozenset[str]:
    """What importing ``module`` imports at once: module-level statements (and class bodies,
    and ``if``/``try``/``with`` blocks), not function bodies, not ``if TYPE_CHECKING``."""
    path = _modules()[module]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[str] = set()

    def visit(statements: list[ast.stmt]) -> None:
        for node in statements:
            if isinstance(node, ast.Import | ast.ImportFrom):
                found.update(_import_targets(module, path, node))
                if isinstance(node, ast.ImportFrom):  # a package's lazy names import their module
                    lazy = _lazy_table(_import_target(module, path, node))
                    found.update(lazy[alias.name] for alias in node.names if alias.name in lazy)
            elif isinstance(node, ast.If):
                if not _is_type_checking(node.test):
                    visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for handler in node.handlers:
                    visit(handler.body)
                visit(node.orelse)
                visit(node.finalbody)
            elif isinstance(node, ast.With | ast.ClassDef):
                visit(node.body)

    visit(tree.body)
    return frozenset(found)


def _with_parents(name: str) -> list[str]:
    """Importing ``a.b.c`` runs ``a`` and ``a.b`` first."""
    parts = name.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def _eager_closure(module: str) -> dict[str, str]:
    """Every module importing ``module`` loads at once → the module that imported it."""
    reached: dict[str, str] = {}
    for parent in _with_parents(module):
        reached.setdefault(parent, module)
    stack = list(reached)
    while stack:
        current = stack.pop()
        if current not in _modules():
            continue  # outside trikafka: recorded, not followed
        for name in _eager_imports(current):
            for step in _with_parents(name):
                if step not in reached:
                    reached[step] = current
                    stack.append(step)
    return reached


def _chain(reached: dict[str, str], name: str, start: str) -> str:
    path = [name]
    while path[-1] != start and reached[path[-1]] != path[-1]:
        path.append(reached[path[-1]])
    return " <- ".join(path)


def test_the_eager_walk_sees_module_level_imports_only():
    """Guard against a vacuous pass of the rule below."""
    assert _is_type_checking(ast.parse("TYPE_CHECKING").body[0].value)
    broker = _eager_closure("trikafka.broker")
    assert {"trio", "trikafka.server.wiring", "trikafka.log"} <= set(broker)
    assert "trikafka.web.server" in broker  # through trikafka.web's __init__
    # The CLI imports the broker inside main(), and trio under TYPE_CHECKING: neither counts.
    assert "trikafka.broker" in _imports("trikafka.cli")
    assert "trikafka.broker" not in _eager_imports("trikafka.cli")
    # A lazy package name resolves through its _LAZY table.
    assert _lazy_table("trikafka")["open_broker"] == "trikafka.broker"


def test_entry_points_import_lazily():
    problems = []
    for entry, forbidden in LAZY_ENTRY_POINTS.items():
        reached = _eager_closure(entry)

        def banned(name: str, forbidden: tuple[str, ...] = forbidden) -> bool:
            return any(_under(name, prefix) for prefix in forbidden)

        for name in sorted(reached):
            if banned(name) and not banned(reached[name]):  # where the line is crossed
                problems.append(f"{entry} loads {_chain(reached, name, entry)}")
    assert problems == []
