"""What is kept of a run: the cell archive, artefact provenance, partial builds (see reprokit.report)."""
