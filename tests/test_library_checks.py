"""The library's front ends refuse each listed mistake where it is made, naming the argument, and
the partitioned front end with an int seed is the pipeline's path (the builders' construction) bit for bit."""

import pytest
import torch
from torch import nn

from reprokit import seeds
from reprokit.bali import BaliConfig, BaliMLP, BaliTrainer
from reprokit.data.task import TaskData
from reprokit.methods.partitioned import PartitionedConfig, PartitionedTraining
from reprokit.partition import ConcreteBernoulliMask, OptimConfig, PartitionedHPO, chunk_assignment, partition


def data(n=60, d=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g)
    return x, (x[:, 0] > 0).long()


def mlp(d=4, out=2):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(d, 8), nn.ReLU(), nn.Linear(8, out))


def hpo(model=None, props=(0.5, 0.25, 0.25), **kw):
    return PartitionedHPO(model if model is not None else mlp(), list(props), optim=OptimConfig(batch_size=16), **kw)


def test_partitions_against_chunks():
    pm = partition(mlp(), [0.5, 0.5])
    with pytest.raises(ValueError, match="chunk_proportions has 3 chunks but the model has 2 partitions"):
        hpo(nn.Sequential(pm))
    with pytest.raises(ValueError, match="param_proportions"):
        hpo(param_proportions=[0.5, 0.5])


def test_chunk_ids_against_chunk_proportions():
    x, y = data()
    wrong = torch.as_tensor(chunk_assignment(60, [0.1, 0.1, 0.8], seed=0))
    with pytest.raises(ValueError, match="chunk_ids give chunk sizes .* disagree with chunk_proportions"):
        hpo().fit(x, y, steps=1, chunk_ids=wrong)
    with pytest.raises(ValueError, match="chunk_ids must lie in 0..2"):
        hpo().fit(x, y, steps=1, chunk_ids=torch.arange(60) % 4)
    right = torch.as_tensor(chunk_assignment(60, [0.5, 0.25, 0.25], seed=0))
    hpo().fit(x, y, steps=1, chunk_ids=right)


def test_a_hyperparameter_that_never_reaches_the_objective_is_named():
    x, y = data()
    mask = ConcreteBernoulliMask(4)
    with pytest.raises(ValueError, match=r"hyperparameters \['hyper_modules\[0\].logits'\] got no gradient"):
        hpo(hyper_modules=[mask]).fit(x, y, steps=1)  # the mask is not in the model's forward
    inside = ConcreteBernoulliMask(4)
    model = nn.Sequential(inside, mlp())
    hpo(model, hyper_modules=[inside]).fit(x, y, steps=2)
    assert inside.logits.grad is not None


def test_hyperparameters_acting_through_the_loss_are_learned():
    x, y = data()
    temperature = nn.Parameter(torch.zeros(()))
    log_prec = nn.Parameter(torch.zeros(()))
    model = mlp()

    def loss_fn(out, yy):
        return nn.functional.cross_entropy(out * temperature.exp(), yy, reduction="none")

    def penalty():  # a Gaussian log prior on the weights with a learned precision, per example
        w = torch.cat([p.reshape(-1) for p in model.parameters()])
        return (0.5 * log_prec.exp() * w.square().sum() - 0.5 * w.numel() * log_prec) / 60

    h = hpo(model, hyper_params=[temperature, log_prec], loss_fn=loss_fn, penalty=penalty, hyper_lr=0.1)
    h.fit(x, y, steps=5)
    assert float(temperature.detach()) != 0.0 and float(log_prec.detach()) != 0.0
    assert h.lml() < 0


def test_output_width_against_n_classes():
    x, y = data()
    with pytest.raises(ValueError, match="n_classes=3 but the model gives 2 outputs"):
        hpo(n_classes=3).fit(x, y, steps=1)


def test_label_shape_and_dtype():
    x, y = data()
    with pytest.raises(ValueError, match=r"y: classification labels must have shape \[N\]"):
        hpo().fit(x, y.reshape(-1, 1), steps=1)
    with pytest.raises(TypeError, match="y: classification labels must be integer"):
        hpo().fit(x, y.float(), steps=1)


@pytest.mark.parametrize(
    "make, field",
    [
        (lambda: OptimConfig(lr="fast"), "OptimConfig.lr"),
        (lambda: OptimConfig(batch_size="12.5"), "OptimConfig.batch_size"),
        (lambda: OptimConfig(weight_decay=[0.1]), "OptimConfig.weight_decay"),
        (lambda: hpo(hyper_lr="slow"), "PartitionedConfig.hyper_lr"),
        (lambda: hpo(props=(0.5, "half")), "chunk_proportions"),
        (lambda: BaliConfig(alpha="a", wishart_n="n_eff"), "BaliConfig.alpha"),
        (lambda: BaliConfig(n_iterations="many", wishart_n="n_eff"), "BaliConfig.n_iterations"),
    ],
)
def test_a_non_number_is_refused_by_name(make, field):
    with pytest.raises(TypeError, match=field.replace(".", r"\.")):
        make()


def test_numbers_given_as_yaml_strings_are_converted():
    assert OptimConfig(lr="1e-3", batch_size="256").lr == 1e-3
    assert OptimConfig(batch_size="256").batch_size == 256
    cfg = BaliConfig(alpha="0.3", n_eff="1000", wishart_n="n_eff")
    assert cfg.alpha == 0.3 and cfg.n_eff == 1000.0
    assert hpo(hyper_lr="1e-2").cfg.hyper_lr == 1e-2
    assert OptimConfig(lr=1).lr == 1 and type(OptimConfig(lr=1).lr) is int  # numbers pass unchanged


def test_bali_labels_and_inputs_are_checked_by_name():
    cfg = BaliConfig(n_iterations=3, n_eff=20, wishart_n="n_eff")
    model = BaliMLP(4, [8], 3, task="classification", config=cfg)
    x, y = data(20)
    with pytest.raises(ValueError, match=r"y: classification labels must be integer class ids of shape \[B\]"):
        BaliTrainer(model).step(x, y.reshape(-1, 1))
    with pytest.raises(ValueError, match="x: each example has 5 features"):
        BaliTrainer(model).step(torch.randn(20, 5), y)
    assert len(BaliTrainer(model).fit(x, y, batch_size=8)) == 3


def test_the_mask_draws_from_its_generator_only():
    x = torch.ones(3, 5)
    a = ConcreteBernoulliMask(5, generator=torch.Generator().manual_seed(1))(x)
    torch.manual_seed(123)
    state = torch.get_rng_state()
    b = ConcreteBernoulliMask(5, generator=torch.Generator().manual_seed(1))(x)
    assert torch.equal(a, b) and torch.equal(torch.get_rng_state(), state)
    c = ConcreteBernoulliMask(5)(x)  # no generator: torch's global one (the pipeline's Fig. 2b cells)
    assert not torch.equal(torch.get_rng_state(), state) and c.shape == x.shape


def test_the_front_end_on_a_plain_model_is_the_builders_construction_bit_for_bit():
    x, y = data(80)
    chunks = torch.as_tensor(chunk_assignment(80, [0.5, 0.25, 0.25], seed=3)).long()
    task = TaskData(x, y, x[:10], y[:10], n_classes=2)
    torch.manual_seed(7)
    mask_a = ConcreteBernoulliMask(4)
    model_a = nn.Sequential(mask_a, mlp())
    a = hpo(model_a, hyper_modules=[mask_a], seed=5).setup(task, 6, chunks)
    torch.manual_seed(7)
    mask_b = ConcreteBernoulliMask(4)
    pm = partition(mlp(), [0.5, 0.25, 0.25], seed=seeds.stream_seed(5, "partition_masks"))
    cfg = PartitionedConfig([0.5, 0.25, 0.25], OptimConfig(batch_size=16))
    b = PartitionedTraining(nn.Sequential(mask_b, pm), pm, list(mask_b.parameters()), task, chunks, cfg, 6, 5)
    for step in range(6):
        torch.manual_seed(step)
        out_a = a.train_step(step)
        torch.manual_seed(step)
        assert out_a == b.train_step(step)
    assert torch.equal(mask_a.logits, mask_b.logits)
    assert a.final_metrics() == b.final_metrics()
