"""One jsonschema error as the one ConfigError message naming the bad key (config and plan both validate)."""

from __future__ import annotations


def first_error(validator, instance, prefix: str) -> str | None:
    """The best-matching error of `validator` on `instance` as "config error at '<prefix>.<path>': <message>", None
    when there is none."""
    import jsonschema

    errors = list(validator.iter_errors(instance))
    if not errors:
        return None
    err = jsonschema.exceptions.best_match(errors)
    where = ".".join([prefix, *map(str, err.absolute_path)]).strip(".") or "(top level)"
    return f"config error at '{where}': {err.message}"
