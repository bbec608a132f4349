# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Table 9 — CNN architecture for the MNIST experiments (partitioned networks paper, App. I.3)
# Rendered from the model definition (`reprokit.models.registry.build_model("mnist_cnn")`) by
# `describe_architecture`: one row per layer, activations folded into the layer they follow, the
# output softmax (which lives in the loss) listed on the last layer as in the paper. Output shapes
# come from one forward pass of a 1x28x28 input. No experiment cells: identical at every scale.

# %%
import pandas as pd

from reprokit.models.registry import build_model, describe_architecture
from reprokit.report.render import notebook
from reprokit.report.render.latex import PARAGRAPH_COLUMN
from reprokit.report.render.tables import static_note, write_table

log = notebook.start_log(snakemake)

MODEL, INPUT_SHAPE = "mnist_cnn", (1, 28, 28)
scale = snakemake.config["scale"]
model = build_model(MODEL)
rows = describe_architecture(model, input_shape=INPUT_SHAPE)
n_params = sum(p.numel() for p in model.parameters())
assert sum(r["params"] for r in rows) == n_params, "every parameter must belong to a listed layer"

table = pd.DataFrame(
    {
        "Layer": [r["layer"] for r in rows],
        "Specification": [r["spec"] for r in rows],
        "Output shape": ["x".join(map(str, r["output_shape"])) for r in rows],
        "Parameters": [f"{r['params']:,}" for r in rows],
    }
)
table

# %%
note = static_note(
    scale, f"reprokit.models '{MODEL}' ({type(model).__name__}), input {'x'.join(map(str, INPUT_SHAPE))}"
)
write_table(
    table,
    snakemake.output["tex"],
    "CNN architecture for the MNIST experiments (Table 9 of the paper, "
    f"after Schwoebel et al. 2021), rendered from the model definition; {n_params:,} parameters in total",
    scale,
    note,
    label="tab:table9",
    column_format="l" + PARAGRAPH_COLUMN.format(0.36) + "ll",  # the Specification column wraps
    footnotes=[
        "Layer and Specification columns correspond to the paper's Table 9; output shapes "
        "(channels x height x width, without the batch) and parameter counts are added from the model."
    ],
)
