# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # BALI wishart_n — the two readings of N in Sigma's degrees of freedom, side by side
# Ours, not a table of the paper. Alg. 1 writes Sigma_l <- U_l / (u_0 + N + D_y + 1) with N the number of
# training points, while Tables 4/5 put N_eff in place of N "for the EMA updates in Eq. (17)", so U carries
# N_eff points' statistics. `n` divides them by u_0 + N, `n_eff` (the config's choice since 2026-11-26) by
# u_0 + N_eff. The readings differ only where N_eff < N: kin8nm, powerplant (N / 4) and protein (N / 4) in
# regression, MNIST and FashionMNIST (N / 50), Spambase (N / 4), Telescope (N / 10) and Diabetes (N / 100) in
# classification. Same cells otherwise (bali_uci_wishart / bali_uci_protein_wishart against bali_uci /
# bali_uci_protein; bali_cls_image_wishart / bali_cls_uci_wishart against bali_cls_image's / bali_cls_uci's BALI);
# the paired difference is over the splits / seeds both readings ran.

# %%
import pandas as pd

from reprokit.report.render import bali_classification as bc
from reprokit.report.render import bali_regression as br
from reprokit.report.render import na, notebook, style
from reprokit.report.render.tables import split_note, write_table
from reprokit.report.store.stats import format_mean_se, format_pm

log = notebook.start_log(snakemake)

inputs = snakemake.input
n_read = br.load([inputs["bali_uci_wishart"], inputs["bali_uci_protein_wishart"]])  # the other reading, n
neff = br.load([inputs["bali_uci"], inputs["bali_uci_protein"]])  # the config's, n_eff
cls_n = bc.load([inputs["bali_cls_image_wishart"], inputs["bali_cls_uci_wishart"]])
cls_neff = bc.load([inputs["bali_cls_image"], inputs["bali_cls_uci"]])


# the regression cells of both readings ran with raw targets (`bali_yraw`, the default when they ran); the
# classification cells are the `bali` method of their kind
REG, CLS = "bali_yraw", "bali"


def beside(df, other, method):
    """`df`'s BALI rows (`method`) on the datasets `other` ran (the main experiments also hold the datasets where
    N_eff = N and the baselines): what the table and its caption describe."""
    if len(df) == 0 or len(other) == 0:
        return df.iloc[0:0]
    return df[(df["method"] == method) & df["dataset"].isin(set(other["dataset"]))]


every = pd.concat([n_read, neff, cls_n, cls_neff])  # for the notes of unavailable cells: every input's
neff, cls_neff = beside(neff, n_read, REG), beside(cls_neff, cls_n, CLS)
scale = style.scale_of(every)
paper = br.paper_values(inputs["bali_paper"])
datasets = [d for d in br.DATASETS if len(n_read) and d in set(n_read["dataset"])]  # where N_eff < N


def ran(df, dataset, method):
    if len(df) == 0:
        return df
    rows = df[(df.dataset == dataset) & (df.method == method) & (df.status == "completed")]
    return rows.set_index("seed")


def entry(values) -> str:
    """mean ± s.e. (one value: the value); 'n/a' when none. Over how many splits: the row's `splits`."""
    v = pd.Series(values, dtype=float)
    digits = 4 if len(v) and abs(v.mean()) < 0.5 else 3  # kin8nm's RMSE and noise sd are ~0.08
    return format_mean_se(v, digits) if len(v) else "n/a"


def splits(*columns) -> str:
    """How many splits the row's n, n_eff and paired entries average: one number where they agree."""
    counts = [len(c) for c in columns]
    return str(counts[0]) if len(set(counts)) == 1 else " / ".join(map(str, counts))


def paired_rows(a, b, name, metrics, paper_of=lambda label: ""):
    common = sorted(set(a.index) & set(b.index))
    out = []
    for metric, label in metrics:
        if metric not in a or metric not in b:
            continue
        diff = (b.loc[common, metric].astype(float) - a.loc[common, metric].astype(float)) if common else []
        out.append(
            {
                "dataset": name,
                "metric": label,
                "splits": splits(a[metric], b[metric], diff),
                "n": entry(a[metric]),
                "n_eff (config)": entry(b[metric]),
                "n_eff - n, paired": entry(diff),
                "paper BALI (quoted)": paper_of(label),
            }
        )
    return out


def paper_entry(dataset):
    def of(label):
        v = paper["rmse" if label == "RMSE" else "ll"].get(dataset, {}).get("BALI") if label in ("RMSE", "LL") else None
        return format_pm(v[0], v[1]) if v else ""

    return of


rows = []
for d in datasets:
    rows += paired_rows(
        ran(n_read, d, REG),
        ran(neff, d, REG),
        br.NAMES.get(d, d),
        (("test_rmse", "RMSE"), ("test_ll", "LL"), ("noise_sd", "noise sd")),
        paper_entry(d),
    )
# classification: the paper prints no Table 2 numbers in our copy, so no paper column there
for d in [d for d in ("mnist", "fashion_mnist", *bc.UCI) if len(cls_n) and d in set(cls_n["dataset"])]:
    ood = (("ood_auroc", "OOD AUROC"),) if d not in bc.UCI else ()  # the UCI sets have no OOD set
    rows += paired_rows(
        ran(cls_n, d, CLS),
        ran(cls_neff, d, CLS),
        bc.DATASETS[d],
        (("test_acc", "accuracy"), ("test_ece", "ECE"), ("test_nll", "NLL"), *ood),
    )
table = pd.DataFrame(
    rows, columns=["dataset", "metric", "splits", "n", "n_eff (config)", "n_eff - n, paired", "paper BALI (quoted)"]
)
table

# %%
footnotes = [
    (
        "Entries: mean ± s.e. over splits (how many: column splits; for n / n_eff / paired where they differ); paired: "
        "over the splits both readings ran. Test RMSE "
        "and log-likelihood in the targets' units; noise sd: the inferred Sigma's, sqrt of its mean diagonal."
    ),
    (
        "Same BALI cells otherwise: Table 4's settings, raw targets (BALI raw-y), N_eff = N / 4, batch 1024 (protein 2048, 30000 "
        "iterations). The paper's BALI column is its own run, quoted from config/papers/bali.yaml."
    ),
    (
        "Classification rows: Table 5's settings (N_eff = N / 50 on MNIST and FashionMNIST, N / 4 Spambase, N / 10 "
        "Telescope, N / 100 Diabetes), batch 2048; test accuracy, expected calibration error, test NLL and, for the "
        "image sets, the OOD AUROC of Fig. 3 (negative predictive entropy; OOD set: the other image set), all of the "
        "Monte Carlo predictive."
    ),
    (
        "n_eff is the config's reading (since 2026-11-26): the better NLL, ECE and AUROC on the image sets and the "
        "better LL on powerplant and protein; n (Alg. 1's N) the better LL on kin8nm."
    ),
    *na.footnotes(every),
]


def joined_note(*notes: str) -> str:
    """The regression and classification notes as one: the scale once, then the counts, then "data: " both data."""
    heads, data = zip(*(split_note(n) for n in notes if n)) if any(notes) else ((), ())
    head = "; ".join(dict.fromkeys(part for h in heads for part in h.split("; ") if part))
    return head + (f"; data: {'; '.join(d for d in data if d)}" if any(data) else "")


write_table(
    table,
    snakemake.output["tex"],
    caption="BALI wishart_n: N in Sigma's degrees of freedom read as the training points n (Alg. 1) or as "
    "N_eff (the EMA statistics' count; the config's reading), where N_eff < N",
    scale=scale,
    footnotes=footnotes,
    label="tab:bali_wishart_n",
    keys=3,  # a split table's parts repeat these
    note=joined_note(
        br.provenance(pd.concat([n_read, neff])) if len(neff) else "",
        bc.provenance(pd.concat([cls_n, cls_neff])) if len(cls_neff) else "",
    ),
)
