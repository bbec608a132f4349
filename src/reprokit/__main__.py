"""`python -m reprokit <command> ...`: the `reprokit` command without the installed script (reprokit.cli)."""

import sys

from .cli import main

sys.exit(main())
