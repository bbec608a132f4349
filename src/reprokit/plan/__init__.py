"""Plan: everything about a cell that is known before it runs, torch-free by construction.

Where it sits among the pipeline's stages (after config.py, before builders/): docs/layout.md.

Each experiment kind is one :class:`KindPlan` registered in :data:`KINDS` (explicit, no module
discovery). `base.py` holds `KindPlan`, `Settings` and the registry and imports no kind; each kind module imports
base and registers its plan; this package only imports every kind (the list below) and re-exports base's names,
so `from reprokit.plan import kind` finds every kind registered. A plan owns the kind's typed :class:`Settings`
(a pydantic model: each default, allowed value, bound and description in exactly one place; the kind's JSON schema
is generated from it), and answers, without torch:

* ``typed_settings(cell)``    the cell's typed settings (grid coordinates override shared settings)
* ``required_variants(cell)`` {name: (dataset, variant file)} the pipeline builds first
* ``required_cells(cell)``    {name: (experiment, coords)} whose metrics.json this cell reads
* ``resolved_settings(cell)`` the resolved settings a cell records and its re-run depends on (Snakemake params)
* ``n_steps(cell)``           training iterations (the cost model and progress)
* ``check(cell)``             everything above, plus what the cell's method needs (a setting only
                              some methods use): :func:`validate_cells` runs it for every cell of a
                              scale before any job starts, so a bad value fails ``snakemake -n``

and names its build function (``experiments.<kind>.build``), imported only when a cell runs.
"""

from . import (  # noqa: F401 - each module registers its kind
    affine_invariance,
    bali_classification,
    federated,
    input_selection,
    synthetic_predictive,
    uci_regression,
    update_timing,
)
from .base import (  # noqa: F401 - the registry and the plans' shared names, re-exported
    KINDS,
    KindPlan,
    Settings,
    check_experiment_specs,
    kind,
    kind_names,
    kind_schema,
    register,
    settings_schema,
    validate_cells,
)
