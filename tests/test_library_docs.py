"""docs/library.md's code blocks and the library packages' docstring examples run (small synthetic data)."""

import doctest
import re
from pathlib import Path

import pytest
import torch

import reprokit.augment
import reprokit.bali
import reprokit.partition

DOC = Path(__file__).resolve().parents[1] / "docs" / "library.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)


def test_the_page_has_one_example_per_method_each_short_with_one_import_line():
    assert len(BLOCKS) == 2
    for block, package in zip(BLOCKS, ("reprokit.partition", "reprokit.bali")):
        lines = [line for line in block.splitlines() if line.strip()]
        assert len(lines) < 25, f"{package} example has {len(lines)} lines"
        reprokit_imports = [line for line in lines if "import" in line and "reprokit" in line]
        assert len(reprokit_imports) == 1 and reprokit_imports[0].startswith(f"from {package} import ")


@pytest.mark.parametrize("index", range(len(BLOCKS)), ids=["partitioned", "bali"])
def test_library_page_code_block_runs(index, capsys):
    namespace: dict = {}
    exec(compile(BLOCKS[index], f"docs/library.md block {index + 1}", "exec"), namespace)
    printed = capsys.readouterr().out
    if index == 0:
        assert namespace["hpo"].lml() < 0 and float(namespace["accuracy"]) > 0.7, printed
    else:
        assert float(namespace["rmse"]) < 0.5, printed


@pytest.mark.parametrize("module", [reprokit.partition, reprokit.bali, reprokit.augment], ids=lambda m: m.__name__)
def test_package_docstring_examples_run(module):
    torch.manual_seed(0)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
