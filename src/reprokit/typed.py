"""Numeric settings checked by name: a number is kept as given, a numeric string converted, anything else refused.

PyYAML reads ``1e-3`` (no dot) as the string ``"1e-3"``; a config dataclass that passes it on fails deep inside
an optimiser without naming the field. The library's configs (`OptimConfig`, `PartitionedConfig`, `BaliConfig`)
run their numeric fields through `number` in ``__post_init__``, so the mistake is reported, or repaired, where
it is made. Numbers pass unchanged (an int stays an int), so no computed value changes.
"""

from __future__ import annotations

import numbers


def number(owner: str, name: str, value, kind: type = float, optional: bool = False):
    """``value`` of the field ``owner.name`` as a number of ``kind`` (float or int); None passes if ``optional``."""
    where = f"{owner}.{name}" if owner else name
    if value is None and optional:
        return None
    if isinstance(value, str):
        try:
            converted = float(value.strip())
        except ValueError:
            raise TypeError(f"{where} must be a number, got the string {value!r}") from None
        if kind is int:
            if not converted.is_integer():
                raise TypeError(f"{where} must be a whole number, got the string {value!r}")
            return int(converted)
        return converted
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{where} must be a number, got {type(value).__name__} {value!r}")
    if kind is int and not isinstance(value, numbers.Integral):
        if not float(value).is_integer():
            raise TypeError(f"{where} must be a whole number, got {value!r}")
        return int(value)
    return value


def numbers_of(obj, floats: tuple[str, ...] = (), ints: tuple[str, ...] = (), optional: tuple[str, ...] = ()) -> None:
    """Check (and convert) the named numeric attributes of the dataclass ``obj`` in place."""
    owner = type(obj).__name__
    for kind, names in ((float, floats), (int, ints)):
        for name in names:
            value = number(owner, name, getattr(obj, name), kind, optional=name in optional)
            setattr(obj, name, value)
