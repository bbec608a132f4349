"""From finished cells to what a reader sees, in layers by the direction data flows:
store/ -> verdicts/ -> render/ -> commands/. A module imports its own layer and the layers before it, never one
after it (tests/test_package_layout.py). Its modules, one line each, are in docs/layout.md (`report/`), the one map
of the package."""
