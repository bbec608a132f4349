"""The verdict engine: the papers' numbers and claims against our cells (see reprokit.report)."""
