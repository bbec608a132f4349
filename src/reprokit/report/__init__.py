"""From finished cells to what a reader sees, in the order the data flows; its modules, one line each, are in
docs/layout.md (`report/`), the one map of the package."""
