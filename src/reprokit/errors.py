"""The pipeline's configuration error, in a module of its own so that config.py and the kinds' plans (which
config.py reads for the schemas) both import it without importing each other."""

from __future__ import annotations

__all__ = ["ConfigError"]


class ConfigError(ValueError):
    """A config key, value or cell path is wrong; the message names it."""
