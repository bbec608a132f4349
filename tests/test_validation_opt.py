"""Validation-set optimisation (+Finetune) and the feature extractor as hyperparameters (Tables 2, 3).

Behaviour checked: the weights never see the validation part and psi never move in a weight step (and
the other way round); the finetune phase trains the weights on all data with SGD lr 0.01 and psi fixed;
the final metrics report the test accuracy before and after finetuning; a run resumes bit-identically on
both sides of the phase switch; a crashed run ends as NaN (not an exception); steps create no tensor off
the data's device. The WRN split covers every parameter once, its psi step moves only psi, and
partitioned training on it partitions the head only. Small random data and tiny models throughout.
"""

import math

import pytest
import torch
from torch import nn

from reprokit.augment.affine import SchwobelAffine
from reprokit.cell import _final_metrics
from reprokit.data.task import TaskData
from reprokit.loop import LoopConfig, run_loop
from reprokit.methods.augmented import SeededAugmentedModel, make_evaluator
from reprokit.methods.feature_extractor import feature_extractor_split, partition_head
from reprokit.methods.partitioned import PartitionedConfig, PartitionedTraining, hyper_update
from reprokit.methods.standard import OptimConfig
from reprokit.methods.validation_opt import ValidationSetOptimisation, validation_split_ids
from reprokit.models.wide_resnet import WideResNet
from reprokit.runtime import generator as make_generator

N, N_TEST = 40, 16


def tiny_task(shape=(1, 8, 8), classes=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    return TaskData(
        torch.rand(N, *shape, generator=g),
        torch.randint(0, classes, (N,), generator=g),
        torch.rand(N_TEST, *shape, generator=g),
        torch.randint(0, classes, (N_TEST,), generator=g),
        n_classes=classes,
    )


def augmented_method(seed_init=0, data=None, n_steps=6, finetune_epochs=2, **kw):
    """Table 2's setting in small: an MLP averaged over Schwöbel augmentations, psi = the augmentation."""
    torch.manual_seed(seed_init)
    data = data or tiny_task()
    aug = SchwobelAffine(0.1)
    net = SeededAugmentedModel(
        nn.Sequential(nn.Flatten(), nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 3)), aug, 2, make_generator(7)
    )
    evaluate = make_evaluator(net, data.x_test, data.y_test, n_samples=2, seed=0)
    kw.setdefault("optim", OptimConfig(batch_size=8))
    return ValidationSetOptimisation(
        net,
        list(aug.parameters()),
        data,
        n_steps=n_steps,
        seed=0,
        hyper_lr=0.05,
        split=(0.75, 0.25),
        finetune_epochs=finetune_epochs,
        evaluate_fn=evaluate,
        **kw,
    )


def params(module):
    return [p.detach().clone() for p in module.parameters()]


def same(a, b):
    return all(torch.equal(x, y) for x, y in zip(a, b))


# ----------------------------------------------------------------------------------------------
# the split and the two kinds of step


def test_split_is_exact_disjoint_and_from_the_seed_stream():
    ids = validation_split_ids(N, (0.75, 0.25), seed=3)
    assert int((ids == 0).sum()) == 30 and int((ids == 1).sum()) == 10
    assert torch.equal(ids, validation_split_ids(N, (0.75, 0.25), seed=3))
    assert not torch.equal(ids, validation_split_ids(N, (0.75, 0.25), seed=4))
    m = augmented_method()
    assert m.split_sizes == [30, 10]
    rows = {tuple(r.flatten().tolist()) for r in m.data.x_train} | {
        tuple(r.flatten().tolist()) for r in m.val_data.x_train
    }
    assert len(rows) == N  # the two parts are disjoint and cover every example
    with pytest.raises(ValueError, match="two proportions"):
        validation_split_ids(N, (0.8, 0.1, 0.1), 0)


def test_given_chunk_ids_are_the_split():
    data = tiny_task()
    ids = torch.zeros(N, dtype=torch.long)
    ids[:5] = 1
    m = augmented_method(data=data, chunk_ids=ids)
    assert torch.equal(m.val_data.x_train, data.x_train[:5]) and torch.equal(m.data.x_train, data.x_train[5:])


def test_weights_never_see_the_validation_part_and_psi_only_moves_on_it():
    data = tiny_task()
    ids = validation_split_ids(N, (0.75, 0.25), seed=0)
    data.x_train[ids == 1] = float("nan")  # any weight update on a validation example poisons the weights
    m = augmented_method(data=data)
    aug = m.net.augmentation
    psi0 = aug.maxima.detach().clone()
    for _ in range(10):  # more than one epoch of the training part
        assert math.isfinite(m.weight_step())
    assert all(torch.isfinite(p).all() for p in m.net.model.parameters())
    assert torch.equal(aug.maxima.detach(), psi0)  # a weight step leaves psi alone
    weights = params(m.net.model)
    m.psi_step()
    assert same(weights, params(m.net.model))  # a psi step leaves the weights alone
    assert not torch.isfinite(aug.maxima).all()  # ...and psi did train on the (poisoned) validation part


# ----------------------------------------------------------------------------------------------
# finetune phase


def test_finetune_trains_weights_on_all_data_with_psi_fixed():
    m = augmented_method(n_steps=4, finetune_epochs=2)
    assert m.finetune_steps == 2 * (N // 8) and m.total_steps == 4 + 10
    for s in range(4):
        m.train_step(s)
    assert m.phase == "search"
    psi = m.net.augmentation.maxima.detach().clone()
    weights = params(m.net.model)
    m.train_step(4)
    assert m.phase == "finetune"
    assert isinstance(m.ft_opt, torch.optim.SGD) and m.ft_opt.param_groups[0]["lr"] == 0.01
    assert m.ft_opt.param_groups[0]["momentum"] == 0.9  # the search optimiser's other settings
    assert not same(weights, params(m.net.model))
    seen = set(m.ft_sampler.perm[: m.ft_sampler.pos].tolist())
    for s in range(5, m.total_steps):
        m.train_step(s)
        if m.ft_sampler.pos == N:  # one epoch without replacement: every example, both parts
            seen |= set(m.ft_sampler.perm.tolist())
    assert seen == set(range(N))
    assert torch.equal(m.net.augmentation.maxima.detach(), psi)


def test_final_metrics_report_before_and_after_finetuning():
    m = augmented_method(n_steps=4, finetune_epochs=1)
    for s in range(4):
        m.train_step(s)
    before = m.evaluate(-1)
    assert set(m.final_metrics()) == {"test_acc", "test_ll", "finetune_test_acc", "finetune_test_ll"}
    assert all(math.isnan(v) for k, v in m.final_metrics().items() if k.startswith("finetune_"))
    for s in range(4, m.total_steps):
        m.train_step(s)
    final = m.final_metrics()
    assert final["test_acc"] == before["test_acc"] and final["test_ll"] == before["test_ll"]
    assert final["finetune_test_ll"] == m.evaluate(-1)["test_ll"] != before["test_ll"]
    no_ft = augmented_method(finetune_epochs=0)
    assert no_ft.total_steps == no_ft.n_search_steps and set(no_ft.final_metrics()) == {"test_acc", "test_ll"}


@pytest.mark.parametrize("stop", [3, 4, 5, 9])  # before, at (the last search step done) and after the switch
def test_resume_is_bit_identical_across_the_phase_switch(stop, tmp_path):
    ref = augmented_method(n_steps=4, finetune_epochs=2)
    for s in range(ref.total_steps):
        ref.train_step(s)
    first = augmented_method(n_steps=4, finetune_epochs=2)
    for s in range(stop):
        first.train_step(s)
    torch.save(first.state_dict(), tmp_path / "ckpt.pt")  # the loop's checkpoints go through torch.save
    resumed = augmented_method(seed_init=123, n_steps=4, finetune_epochs=2)  # everything must come from the state
    resumed.load_state_dict(torch.load(tmp_path / "ckpt.pt", weights_only=False))
    torch.manual_seed(999)  # the global RNG must not matter
    for s in range(stop, resumed.total_steps):
        resumed.train_step(s)
    assert resumed.final_metrics() == ref.final_metrics()
    assert same(params(resumed.net), params(ref.net))


def test_a_crashed_run_is_nan_not_an_exception():
    m = augmented_method(optim=OptimConfig(optimizer="sgd", lr=1e38, batch_size=8))  # weights overflow at once
    result = run_loop(m, LoopConfig(n_steps=m.total_steps, eval_every=0))
    assert result.status == "diverged" and result.steps < m.total_steps
    metrics = _final_metrics(m.final_metrics, result)  # what the cell writes to metrics.json
    assert set(metrics) == {"test_acc", "test_ll", "finetune_test_acc", "finetune_test_ll"}
    assert all(math.isnan(v) for v in metrics.values())


def test_steps_create_no_tensor_off_the_datas_device():
    m = augmented_method(n_steps=2, finetune_epochs=1)
    with torch.device("meta"):  # a tensor made without a device would be meta and fail to mix (tests/test_device.py)
        for s in range(4):
            assert math.isfinite(m.train_step(s)["loss"])
        assert math.isfinite(m.final_metrics()["finetune_test_acc"])


# ----------------------------------------------------------------------------------------------
# feature extractor as hyperparameters (Table 3)


def tiny_wrn(seed=0):
    torch.manual_seed(seed)
    return WideResNet(depth=8, width=1, num_classes=3, norm="group", gn_groups=2)  # one block per stage


def image_task():
    g = torch.Generator().manual_seed(0)
    return TaskData(
        torch.rand(N, 3, 8, 8, generator=g),
        torch.randint(0, 3, (N,), generator=g),
        torch.rand(N_TEST, 3, 8, 8, generator=g),
        torch.randint(0, 3, (N_TEST,), generator=g),
        n_classes=3,
    )


def test_split_covers_every_parameter_exactly_once():
    wrn = tiny_wrn()
    psi, weights = feature_extractor_split(wrn)
    ids = [id(p) for p in psi + weights]
    assert len(ids) == len(set(ids)) and set(ids) == {id(p) for p in wrn.parameters()}
    names = {id(p): n for n, p in wrn.named_parameters()}
    assert all(names[id(p)].split(".")[0] in ("conv1", "stage1", "stage2") for p in psi)
    assert all(names[id(p)].split(".")[0] in ("stage3", "norm", "fc") for p in weights)
    assert {names[id(p)].split(".")[0] for p in psi} == {"conv1", "stage1", "stage2"}
    with pytest.raises(TypeError):
        feature_extractor_split(nn.Linear(2, 2))


def test_validation_opt_psi_step_moves_only_the_feature_extractor():
    wrn = tiny_wrn()
    psi, weights = feature_extractor_split(wrn)
    m = ValidationSetOptimisation(wrn, psi, image_task(), OptimConfig(batch_size=8), 2, seed=0, finetune_epochs=1)
    assert {id(p) for p in m.weight_params} == {id(p) for p in weights}
    w0, p0 = [p.detach().clone() for p in weights], [p.detach().clone() for p in psi]
    m.psi_step()
    assert same(w0, weights) and not same(p0, psi)
    p1 = [p.detach().clone() for p in psi]
    m.weight_step()
    assert same(p1, psi) and not same(w0, weights)
    for s in range(m.total_steps):
        m.train_step(s)
        if s == m.n_search_steps - 1:
            p_search = [p.detach().clone() for p in psi]
    assert m.phase == "finetune" and same(p_search, psi)  # the feature extractor is fixed while finetuning


def test_partitioned_training_partitions_the_head_only():
    wrn = tiny_wrn()
    x = image_task().x_test
    before = wrn(x).detach()
    psi, weights = feature_extractor_split(wrn)
    pm = partition_head(wrn, [0.5, 0.5], seed=0)
    torch.testing.assert_close(wrn(x), before)  # every subnetwork equals the unwrapped model at wrap time
    partitioned = {id(p) for p, _ in pm.partitioned_parameters()}
    assert partitioned == {id(p) for p in weights}  # the head's parameter objects survive wrapping
    assert not any(hasattr(getattr(wrn, name), "parametrizations") for name in ("conv1",))
    assert not any(
        hasattr(mod, "parametrizations") for name in ("stage1", "stage2") for mod in getattr(wrn, name).modules()
    )
    data = image_task()
    ids = torch.tensor([0] * 30 + [1] * 10)
    cfg = PartitionedConfig(chunk_proportions=[0.75, 0.25], optim=OptimConfig(batch_size=8), hyper_lr=1e-2)
    m = PartitionedTraining(wrn, pm, psi, data, ids, cfg, n_steps=2, seed=0)
    assert {id(p) for p in m.weight_params} == {id(p) for p in weights}
    p0, w0 = [p.detach().clone() for p in psi], [p.detach().clone() for p in weights]
    m.train_step(0)  # a parameter step (head only) then a hyper step (psi only)
    assert not same(p0, psi) and not same(w0, weights)
    w1, p1 = [p.detach().clone() for p in weights], [p.detach().clone() for p in psi]
    kh, idx = m.schedule.hyper_step(8)
    hyper_update(pm, m.hyper_opt, kh, m._batch_loss(idx), m.hyper_params)
    assert same(w1, weights) and not same(p1, psi)
