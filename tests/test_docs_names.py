"""The docs name only what exists: every repository path, module (`reprokit.x.y`) and qualified function or class
(`reprokit.x.f`, `module.f`, `Class.method`, `path/to/module.f`) that README.md, docs/*.md and the comments of
workflow/rules/*.smk name is in the repository. Torch-free and static (the source is parsed, nothing imported).

What is read as a name, and what is left alone on purpose:

- paths: a markdown link's target (relative to its doc); a word that starts with a top-level folder of the
  repository (`src/`, `workflow/`, `config/`, `docs/`, `tests/`, `benchmarks/`, `slurm/`, `figures/`) or with a
  folder of the package (`report/`, `plan/`, `methods/`, ...: relative to src/reprokit/, where the docs'
  tables name them); a backticked file name with a source extension (`cell.py`, `common.smk`), found anywhere.
  A placeholder (`<scale>`, `{name}`, `*`, `...`) matches any one name: at least one file must match.
- left alone: URLs and absolute paths; what a run writes, which does not exist before it (OUTPUTS: the ignored
  folders of .gitignore, and `figures/<artefact>.*`, which a build writes and the repository keeps out of git).
- names: a dotted name starting `reprokit.` must resolve to a module and its attributes; `module.name` where
  `module` is a module of the package (`style.start_log`, `render.style.finish_figure`) must name something that
  module defines (at top level or in one of its classes); `Class.name` where `Class` is a class of the package
  must name something that class or a base of it defines. Other dotted words (config keys such as `run.device`,
  `torch.func.vmap`, instance attributes such as `ctx.load`) are not the package's names and are left alone;
  NOT_CODE lists the few that look like the package's but are not.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PKG = REPO / "src" / "reprokit"
TOP = ("src", "workflow", "config", "docs", "tests", "benchmarks", "slurm", "figures", ".ci")
# Written by a run, absent from a clean clone: the folders .gitignore keeps out (a cell's results, its checkpoints
# and log, the data cache) and, under figures/, what is not in one of its folders (figures/<artefact>.*: a build's
# outputs; the committed builds are figures/<scale>/).
OUTPUTS = re.compile(r"^(results|checkpoints|logs|data|\.snakemake)/|^report\.html$")
# Dotted words that start like a module of the package but are neither code nor a key of the config
NOT_CODE = {"provenance.cpu_isa": "a field of an artefact's provenance record (docs/devices.md)"}
# Files a doc names on purpose that do not exist: a walk-through's new files, retired code read back from git
NOT_HERE = {
    "docs/architecture.md": {
        "src/reprokit/methods/swag.py",
        "src/reprokit/plan/active_learning.py",
        "src/reprokit/builders/active_learning.py",
    },  # "add a method / a kind": the new files
    "docs/archive.md": {"archive_migrations.py"},  # retired, read back with `git show <commit>:<path>`
}
PLACEHOLDER = re.compile(r"<[^<>/]*>|\{[^{}/]*\}|\*+|\.\.\.|…")
SOURCE_EXT = (".py", ".smk", ".yaml", ".yml", ".md", ".toml", ".tsv", ".sh")  # not a cell's .json / .csv
FILE_EXT = (*SOURCE_EXT, ".json", ".jsonl", ".csv", ".pdf", ".png", ".tex", ".html", ".log", ".pt", ".rst", ".ipynb")


def doc_texts() -> dict[str, str]:
    """{source: text} for README.md, docs/*.md and the comments of workflow/rules/*.smk."""
    out = {str(p.relative_to(REPO)): p.read_text() for p in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]}
    for p in sorted((REPO / "workflow" / "rules").glob("*.smk")):
        comments = [ln.split("#", 1)[1] for ln in p.read_text().splitlines() if ln.lstrip().startswith("#")]
        out[str(p.relative_to(REPO))] = "\n".join(comments)
    return out


# ------------------------------------------------------------------------------------------------ paths


def _exists(path: str, base: Path) -> bool:
    """Whether `path` (relative to `base`; placeholders match any one name) names a file or folder."""
    path = path.rstrip("/")
    if not PLACEHOLDER.search(path):
        return (base / path).exists()
    pattern = PLACEHOLDER.sub("*", path)
    return any(base.glob(pattern))


def is_output(rel: str) -> bool:
    """Whether a repository-relative path is what a run writes (OUTPUTS; under figures/, outside its folders)."""
    if rel.endswith(".py"):
        return False  # a module, never a run's output
    if OUTPUTS.search(rel):
        return True
    top, _, rest = rel.partition("/")
    return top == "figures" and not any(
        p.is_dir() for p in REPO.glob("figures/" + PLACEHOLDER.sub("*", rest.split("/")[0]))
    )


def path_problem(path: str, bases: list[Path]) -> str | None:
    """None when `path` exists relative to one of `bases`, is a run's output, or names `module.name` that its
    module defines (report/verdicts/results.fill_numbers); else what is wrong."""
    path = path.split("#", 1)[0].rstrip(".,;:)")
    if not path or "://" in path or path.startswith(("/", "mailto:")):
        return None
    if any(_exists(path, b) for b in bases):
        return None
    full = (bases[0] / path).resolve()
    if is_output(str(full.relative_to(REPO)) if full.is_relative_to(REPO) else path):
        return None
    head, _, attr = path.rpartition(".")
    if attr.isidentifier() and "/" in head:
        files = [f for b in bases for f in (b.glob(PLACEHOLDER.sub("*", head) + ".py"))]
        if files:
            return None if any(attr in names_of(f) for f in files) else f"{path}: its module defines no '{attr}'"
    return f"{path}: no such file or folder"


@functools.cache
def package_folders() -> frozenset:
    return frozenset(p.name for p in PKG.iterdir() if p.is_dir() and not p.name.startswith("_"))


@functools.cache
def repo_file_names() -> frozenset:
    top = {".git", ".venv", "results", "checkpoints", "logs", "data", ".snakemake"}  # not the repository's own
    return frozenset(
        p.name for p in REPO.rglob("*") if p.relative_to(REPO).parts[0] not in top and "__pycache__" not in p.parts
    )


WORD_PATH = re.compile(
    r"(?<![\w/.~<{}:-])((?:" + "|".join(re.escape(t) for t in TOP) + r"|{pkg})/[\w./<>{{}}*~…-]*[\w>}}*/])"
)


def links_in(text: str) -> list[str]:
    """Markdown link targets (relative to the doc's folder)."""
    return [m.group(1) for m in re.finditer(r"\]\(([^)\s]+)\)", text)]


def paths_in(text: str) -> list[str]:
    """Words starting with a top-level folder of the repository or a folder of the package."""
    word = re.compile(WORD_PATH.pattern.replace("{pkg}", "|".join(sorted(package_folders()))))
    return [m.group(1) for m in word.finditer(text)]


def file_names_in(text: str) -> list[str]:
    """Backticked bare file names with a source extension (`cell.py`, `common.smk`)."""
    return [
        m.group(1)
        for m in re.finditer(r"`([\w.-]+)`", text)
        if m.group(1).endswith(SOURCE_EXT) and not PLACEHOLDER.search(m.group(1))
    ]


# ------------------------------------------------------------------------------------------------ names


@functools.cache
def _tree(module: Path) -> ast.Module:
    return ast.parse(module.read_text())


@functools.cache
def names_of(module: Path) -> frozenset:
    """What a module defines: top-level functions, classes, assignments and imports, and its classes' members."""
    out = set()
    for node in _tree(module).body:
        out |= _defined(node)
        if isinstance(node, ast.ClassDef):
            for sub in node.body:
                out |= _defined(sub)
    return frozenset(out)


def _defined(node) -> set:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, ast.Assign):
        return {t.id for t in node.targets if isinstance(t, ast.Name)}
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return {node.target.id}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    if isinstance(node, (ast.If, ast.Try)):
        return set().union(*(_defined(n) for n in node.body))
    return set()


@functools.cache
def modules() -> dict[str, list[Path]]:
    """{dotted module path relative to reprokit, e.g. 'report.render.style': [file]}; also each suffix
    ('render.style', 'style'), so a doc's short form finds its module."""
    out: dict[str, list[Path]] = {}
    for p in PKG.rglob("*.py"):
        parts = p.relative_to(PKG).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        for i in range(len(parts)):
            out.setdefault(".".join(parts[i:]), []).append(p)
    return out


@functools.cache
def classes() -> dict[str, list[tuple[Path, ast.ClassDef]]]:
    out: dict = {}
    for p in PKG.rglob("*.py"):
        for node in ast.walk(_tree(p)):
            if isinstance(node, ast.ClassDef):
                out.setdefault(node.name, []).append((p, node))
    return out


def _class_has(name: str, attr: str, seen=()) -> bool:
    for _, node in classes().get(name, []):
        if any(attr in _defined(sub) for sub in node.body):
            return True
        for base in node.bases:
            base_name = base.id if isinstance(base, ast.Name) else getattr(base, "attr", None)
            if base_name and base_name not in seen:
                if base_name not in classes():
                    return True  # a base from outside the package (pydantic, torch): not ours to check
                if _class_has(base_name, attr, (*seen, name)):
                    return True
    return False


@functools.cache
def config_keys() -> frozenset:
    """Every dotted path into the config files (`run.device`, `bali.alpha`, `data.cache_dir`), any depth: a doc
    naming one names a setting, not code."""
    import yaml

    out = set()

    def walk(node, prefix):
        if isinstance(node, dict):
            for key, value in node.items():
                key = str(key)
                out.add(key)
                if prefix:
                    out.add(f"{prefix}.{key}")
                walk(value, key)
        elif isinstance(node, list):
            for value in node:
                walk(value, prefix)

    for path in [REPO / "config" / "config.yaml", *sorted((REPO / "config" / "experiments").glob("*.yaml"))]:
        walk(yaml.safe_load(path.read_text()), "")
    return frozenset(k for k in out if "." in k)


def name_problem(name: str) -> str | None:
    """None when a dotted name resolves or is not one of the package's names; else what is wrong."""
    name = name.removesuffix("()")
    if name in NOT_CODE or name in config_keys():
        return None
    parts = name.split(".")
    if parts[0] == "reprokit":
        parts = parts[1:]
        if not parts:
            return None
    elif parts[0] in classes():
        return None if _class_has(parts[0], parts[1]) else f"{name}: class {parts[0]} has no '{parts[1]}'"
    for i in range(len(parts), 0, -1):  # the longest prefix that is a module
        files = modules().get(".".join(parts[:i]))
        if files:
            rest = parts[i:]
            if not rest:
                return None
            if any(rest[0] in names_of(f) for f in files):
                if len(rest) > 1 and rest[0] in classes() and not _class_has(rest[0], rest[1]):
                    return f"{name}: class {rest[0]} has no '{rest[1]}'"
                return None
            if name.startswith("reprokit.") or i == len(parts) - 1:
                where = ", ".join(str(f.relative_to(REPO)) for f in files)
                return f"{name}: {where} defines no '{rest[0]}'"
            return None
    return f"{name}: no such module" if name.startswith("reprokit.") else None


DOTTED = re.compile(r"(?<![\w./-])((?:reprokit|[A-Za-z_]\w*)(?:\.[A-Za-z_]\w*)+)(?:\(\))?(?![\w/-])")


def names_in(text: str) -> list[str]:
    """Dotted names: backticked ones (the whole span, or its leading word), and `reprokit.` ones anywhere."""
    out = []
    for m in re.finditer(r"`([^`\n]+)`", text):
        head = re.match(r"\w[\w.]*", m.group(1))
        if head and "." in head.group(0) and not head.group(0).endswith(FILE_EXT):
            out.append(head.group(0).rstrip("."))
    out += [m.group(1) for m in re.finditer(r"(?<![\w/.])(reprokit(?:\.\w+)+)", text)]
    return out


# ------------------------------------------------------------------------------------------------ the checks


def problems(text: str, source: str) -> list[str]:
    """What `text` (the doc `source`, relative to the repository) names that does not exist."""
    found = [p for path in links_in(text) if (p := path_problem(path, [(REPO / source).parent]))]
    for path in paths_in(text):
        bases = [REPO, PKG] if path.split("/", 1)[0] in package_folders() else [REPO]
        problem = path_problem(path, bases)
        if problem:
            found.append(problem)
    for name in file_names_in(text):
        if name not in repo_file_names() and not OUTPUTS.search(name):
            found.append(f"{name}: no file of that name in the repository")
    for name in names_in(text):
        problem = name_problem(name)
        if problem:
            found.append(problem)
    found = [p for p in found if p.split(":", 1)[0] not in NOT_HERE.get(source, ())]
    return [f"{source}: {p}" for p in dict.fromkeys(found)]


@pytest.mark.parametrize("source", list(doc_texts()))
def test_every_path_module_and_function_a_doc_names_exists(source):
    assert problems(doc_texts()[source], source) == []


def test_a_doc_naming_what_does_not_exist_fails():
    """FAKE doc text: each kind of reference once as it exists and once as it does not."""
    good = (
        "See [the layout](docs/layout.md), src/reprokit/report/render/notebook.py, report/render/style.py, "
        "`reprokit.report.render.notebook.start_log`, `notebook.start_log`, `KindPlan.resolved_settings`, "
        "config/papers/<paper>.yaml, results/<scale>/<experiment>.csv, figures/fig2.pdf, `cell.py`, "
        "`run.device`, `torch.func.vmap`, https://example.org/x/y.py"
    )
    assert problems(good, "README.md") == []
    bad = (
        "See [the layout](docs/layuot.md), src/reprokit/report/render/notbook.py, report/render/stlye.py, "
        "`reprokit.report.render.notebook.stat_log`, `reprokit.report.rendr`, `style.start_log`, "
        "`KindPlan.cel_settings`, config/papers/<paper>.yml, `cel.py`, report/verdicts/results.fill_numbrs"
    )
    found = problems(bad, "README.md")
    for wrong in (
        "docs/layuot.md",
        "notbook.py",
        "stlye.py",
        "stat_log",
        "reprokit.report.rendr",
        "style.start_log",
        "cel_settings",
        "<paper>.yml",
        "cel.py",
        "fill_numbrs",
    ):
        assert any(wrong in p for p in found), (wrong, found)
    assert len(found) == 10, found
