"""The package's import structure: report code (and the artefact notebooks) imports nothing that imports
torch, no two modules import each other, directly or around a longer loop (lazy imports included), imports inside
report/ and plan/ run one way only (report: store < verdicts < render < commands; plan: base < kinds < the
package), and every module entry point is a subcommand of the `reprokit` command."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from reprokit.cli import COMMANDS

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src" / "reprokit"


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """reprokit modules `path` imports anywhere in its body (module level or inside functions)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("reprokit")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if not mod.startswith("reprokit"):
                continue
            out.add(mod)
            out |= {f"{mod}.{a.name}" for a in node.names}  # `from . import x` names a module
    return out


def _graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in SRC.rglob("*.py")}
    return {m: {i for i in _imports(p) if i in modules and i != m} for m, p in modules.items()}


def _cycle(graph: dict[str, set[str]], within: str) -> list[str] | None:
    nodes = {m for m in graph if m.startswith(within)}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for n in sorted(graph[m] & nodes):
            if state.get(n) == 1:
                return stack[stack.index(n) :] + [n]
            if n not in state:
                found = visit(n)
                if found:
                    return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(nodes):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return None


def test_the_cycle_finder_finds_a_planted_loop():
    assert _cycle({"a.x": {"a.y"}, "a.y": {"a.z"}, "a.z": {"a.x"}}, "a.") == ["a.x", "a.y", "a.z", "a.x"]
    assert _cycle({"a.x": {"a.y"}, "a.y": set()}, "a.") is None


def test_report_modules_import_each_other_without_a_loop():
    cycle = _cycle(_graph(), "reprokit.report")
    assert cycle is None, " -> ".join(cycle)


@pytest.mark.parametrize(
    "module",
    sorted(_module_name(p) for p in (SRC / "report" / "store").glob("*.py"))
    + ["reprokit.plan", "reprokit.job", "reprokit.config", "reprokit.budget", "reprokit.packing", "reprokit.cli"]
    + ["reprokit.runtime_settings", "reprokit.seeds", "reprokit.atomic", "reprokit.predictive_shape"],
)
def test_module_imports_no_torch(module):
    code = f"import sys, {module}; print('torch' in sys.modules)"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert res.returncode == 0, res.stderr[-1500:]
    assert res.stdout.strip() == "False", f"{module} imports torch"


# With torch made unimportable: what a launcher does before a cell process loads torch (the settings, the
# environment of the CPU instruction-set pin, the host's CPU) must not need it, even inside a function.
NO_TORCH = r"""
import importlib.abc, sys


class NoTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError(f"{name} imported")
        return None


sys.meta_path.insert(0, NoTorch())
from reprokit import runtime_settings as rs

settings = rs.RuntimeSettings.from_dict({"device": "cpu", "cpu_isa": "avx2"})
assert settings.numeric_dict() == {"device": "cpu", "precision": "fp32", "deterministic": False}
assert rs.run_schema()["properties"]["cpu_isa"]
assert rs.cpu_isa_env("avx2")[rs.CPU_ISA_VAR] == "avx2"
environ = {}
record = rs.pin_cpu_isa("native", environ)
assert environ == {rs.CPU_ISA_VAR: "native"} and record["torch_capability"] is None
assert rs.cpu_model() and rs.cpu_model(with_family=True)
rs.cpu_isas_supported()
rs.cpu_isa_record()
try:
    import reprokit.runtime
except ImportError:
    print("BLOCKED")
"""


def test_runtime_settings_work_with_torch_unimportable():
    """reprokit.runtime_settings, used with torch blocked by a meta-path finder in a fresh process; the torch half,
    reprokit.runtime, is blocked there (which shows the blocker works)."""
    res = subprocess.run([sys.executable, "-c", NO_TORCH], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert res.returncode == 0, res.stderr[-1500:]
    assert res.stdout.strip() == "BLOCKED", res.stdout


def _first_torch_import(wanted: list[tuple[str, str]]) -> str:
    """Each (who, module) of `wanted` imported one after another in one fresh process: "CLEAN", or "TORCH who
    module" for the first that brings torch in."""
    code = (
        "import importlib, sys\n"
        f"for who, mod in {wanted!r}:\n"
        "    importlib.import_module(mod)\n"
        "    if 'torch' in sys.modules:\n"
        "        print('TORCH', who, mod); break\n"
        "else:\n"
        "    print('CLEAN')\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert res.returncode == 0, res.stderr[-1500:]
    return res.stdout.strip()


def test_no_report_module_imports_torch():
    """Every module of report/ imported one after another in one fresh process: the first that brings torch in is
    named."""
    modules = sorted(_module_name(p) for p in (SRC / "report").rglob("*.py"))
    found = _first_torch_import([("report", m) for m in modules])
    assert found == "CLEAN", found


# -- one direction inside report/ and plan/ ---------------------------------------------------------------------

# report/'s layers in the direction data flows: reading cells, deciding verdicts, drawing, the command lines. A
# module imports its own layer and the layers before it, never one after it.
REPORT_LAYERS = ("store", "verdicts", "render", "commands")
PLAN_SHARED = ("reprokit.plan.base", "reprokit.plan.costs", "reprokit.plan.methods")  # every kind imports; no kind
PLAN_BLOCKS = ("reprokit.plan.bali_blocks",)  # settings blocks shared by several kinds: above base, below the kinds


def report_layer(module: str) -> tuple[int, str] | None:
    """(rank, name) of a report/ module's layer (its folder under report/); None outside report/'s layers."""
    parts = module.split(".")
    if parts[:2] != ["reprokit", "report"] or len(parts) < 3 or parts[2] not in REPORT_LAYERS:
        return None
    return REPORT_LAYERS.index(parts[2]), parts[2]


def plan_layer(module: str) -> tuple[int, str] | None:
    """(rank, name) of a plan/ module: base and costs, then shared blocks, then the kinds, then the package itself
    (which imports every kind to register it)."""
    if module == "reprokit.plan":
        return 3, "the package"
    if not module.startswith("reprokit.plan."):
        return None
    if module in PLAN_SHARED:
        return 0, "base"
    if module in PLAN_BLOCKS:
        return 1, "shared blocks"
    return 2, "a kind"


def _upward(graph: dict[str, set[str]], layer) -> list[str]:
    """Every import that runs against the layers (`layer`: module -> (rank, name) or None): "a (its layer)
    imports b (b's layer)"."""
    out = []
    for m, deps in graph.items():
        mine = layer(m)
        if mine is None:
            continue
        for d in deps:
            theirs = layer(d)
            if theirs is not None and theirs[0] > mine[0]:
                out.append(f"{m} ({mine[1]}) imports {d} ({theirs[1]})")
    return sorted(out)


def test_the_layering_check_names_an_import_against_the_layers():
    planted = {
        "reprokit.report.store.cells": {"reprokit.report.render.style"},
        "reprokit.report.render.style": {"reprokit.report.store.cells", "reprokit.report.verdicts.papers"},
        "reprokit.report.verdicts.papers": {"reprokit.report.commands.glance"},
        "reprokit.report.commands.glance": {"reprokit.report.verdicts.papers"},
    }
    assert _upward(planted, report_layer) == [
        "reprokit.report.store.cells (store) imports reprokit.report.render.style (render)",
        "reprokit.report.verdicts.papers (verdicts) imports reprokit.report.commands.glance (commands)",
    ]
    planted = {
        "reprokit.plan.base": {"reprokit.plan.federated"},
        "reprokit.plan.federated": {"reprokit.plan.base", "reprokit.plan"},
        "reprokit.plan": {"reprokit.plan.base", "reprokit.plan.federated"},
    }
    assert _upward(planted, plan_layer) == [
        "reprokit.plan.base (base) imports reprokit.plan.federated (a kind)",
        "reprokit.plan.federated (a kind) imports reprokit.plan (the package)",
    ]


def test_report_layers_import_only_their_own_and_lower_layers():
    """store < verdicts < render < commands: the verdicts draw nothing, the store decides nothing, and no library
    module imports a command line. Every module of report/ lives in one of the layers."""
    graph = _graph()
    outside = [m for m in graph if m.startswith("reprokit.report.") and report_layer(m) is None]
    assert outside == [], f"report/ modules outside the layers {REPORT_LAYERS}: {outside}"
    assert _upward(graph, report_layer) == []


def test_plan_imports_run_one_way():
    """plan/base.py (KindPlan, the registry) imports no kind; a kind imports base, never the package that
    imports every kind."""
    assert _upward(_graph(), plan_layer) == []


def test_builders_read_upstream_cells_through_the_store():
    """A builder that reads another cell's result (settings._inputs) reads it with report.store.cells, the one
    reader of a cell, not with json itself."""
    readers = sorted(
        f"{path.name}:{node.lineno}"
        for path in (SRC / "builders").glob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute)
        and node.attr in ("load", "loads")
        and isinstance(node.value, ast.Name)
        and node.value.id == "json"
    )
    assert readers == []


# -- the `reprokit` command ---------------------------------------------------------------------------------------


def _entry_points() -> set[str]:
    """The modules under src/ with a `main` and an `if __name__ == "__main__":` block."""
    found = set()
    for path in SRC.rglob("*.py"):
        tree = ast.parse(path.read_text())
        has_main = any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in tree.body)
        guarded = any(
            isinstance(n, ast.If) and "__name__" in ast.unparse(n.test) and "__main__" in ast.unparse(n.test)
            for n in tree.body
        )
        if has_main and guarded:
            found.add(_module_name(path))
    return found


def test_every_module_entry_point_is_a_subcommand():
    assert _entry_points() == {module for module, _ in COMMANDS.values()}
    pyproject = (REPO / "pyproject.toml").read_text()
    assert '[project.scripts]\nreprokit = "reprokit.cli:main"' in pyproject


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_each_subcommand_prints_its_help(command):
    res = subprocess.run(
        [sys.executable, "-m", "reprokit", command, "--help"], capture_output=True, text=True, cwd=REPO, timeout=300
    )
    assert res.returncode == 0, res.stderr[-1500:]
    assert res.stdout.strip(), f"reprokit {command} --help printed nothing"


def test_the_command_lists_its_subcommands():
    res = subprocess.run([sys.executable, "-m", "reprokit", "--help"], capture_output=True, text=True, cwd=REPO)
    assert res.returncode == 0 and "build-partial" in res.stdout and "report" in res.stdout
    res = subprocess.run([sys.executable, "-m", "reprokit", "nonsense"], capture_output=True, text=True, cwd=REPO)
    assert res.returncode == 2 and "unknown command 'nonsense'" in res.stderr


# notebooks that draw the library itself, not results: they need it, torch included
LIBRARY_FIGURES = {
    "fig4.py": "the masks of a real partitioned nn.Linear (reprokit.partition.partition)",
    "table9.py": "the CNN's layers, read from the model definition (reprokit.models.registry)",
}


def test_artefact_notebooks_import_only_torch_free_package_code():
    """Each `from reprokit... import ...` of every notebook, imported one after another in one fresh
    process: the first that brings torch in is named with its notebook."""
    wanted = []
    for nb in sorted((REPO / "workflow" / "notebooks").glob("*.py")):
        if nb.name in LIBRARY_FIGURES:
            continue
        for node in ast.walk(ast.parse(nb.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("reprokit"):
                wanted.append((nb.name, node.module))
    assert wanted
    found = _first_torch_import(wanted)
    assert found == "CLEAN", found


LIBRARY = ("augment", "bali", "models", "partition", "methods")  # what a researcher imports without the pipeline
# the pipeline's stages; data containers (data.task), metrics, named random streams (seeds), device placement
# (runtime) and the `run:` settings (runtime_settings) are shared by both
PIPELINE = ("config", "plan", "builders", "cell", "loop", "budget", "report")


def _library_imports_of_pipeline(graph) -> list[str]:
    lib = tuple(f"reprokit.{d}" for d in LIBRARY)
    pipe = tuple(f"reprokit.{d}" for d in PIPELINE)
    return sorted(
        f"{m} -> {i}"
        for m, deps in graph.items()
        if m.startswith(lib)
        for i in deps
        if any(i == p or i.startswith(p + ".") for p in pipe)
    )


def test_library_folders_import_no_pipeline_stage():
    """partitioned networks, BALI, the baselines, models and augmentations import no config, plan, build, loop
    or report module (data containers and metrics are shared): the methods are usable without the pipeline."""
    assert _library_imports_of_pipeline(_graph()) == []


def test_the_layering_check_sees_a_library_module_importing_the_plan():
    planted = {
        "reprokit.methods.x": {"reprokit.plan.uci_regression"},
        "reprokit.plan.uci_regression": set(),
        "reprokit.bali.y": {"reprokit.data.task", "reprokit.metrics"},
    }
    assert _library_imports_of_pipeline(planted) == ["reprokit.methods.x -> reprokit.plan.uci_regression"]
