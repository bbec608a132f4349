"""Model zoo: shapes, hand-computed parameter counts, FixUp init, Table 9 description, registry."""

import math

import pytest
import torch
from torch import nn

from reprokit.augment.concrete_dropout import ConcreteDropout, concrete_dropout_parameters
from reprokit.models.fixup_resnet import FixupBasicBlock, FixupResNet
from reprokit.models.layers import Bias, Scale
from reprokit.models.mnist_cnn import MnistCNN
from reprokit.models.registry import build_model, describe_architecture, model_names
from reprokit.models.resnet_gn import ResNet9GN, resnet50_gn
from reprokit.models.wide_resnet import WideResNet, wrn_blocks_per_stage


def n_params(m: nn.Module) -> int:
    return sum(p.numel() for p in m.parameters())


def conv(cin, cout, k, bias=True):
    return cin * cout * k * k + (cout if bias else 0)


def fc(cin, cout):
    return cin * cout + cout


# ------------------------------------------------------------------------------------------ MNIST CNN

TABLE9 = [
    ("2D convolution", "channels=20, kernel size=(5, 5), padding=2, activation=ReLU"),
    ("Max pooling", "pool size=(2, 2), stride=2"),
    ("2D convolution", "channels=50, kernel size=(5, 5), padding=2, activation=ReLU"),
    ("Max pooling", "pool size=(2, 2), stride=2"),
    ("Fully connected", "units=500, activation=ReLU"),
    ("Fully connected", "units=50, activation=ReLU"),
    ("Fully connected", "units=10, activation=Softmax"),
]


def test_mnist_cnn_shapes_and_parameter_count():
    m = MnistCNN()
    assert m(torch.randn(2, 1, 28, 28)).shape == (2, 10)
    # Table 9 by hand: conv 1->20 5x5, conv 20->50 5x5, 28 -> 14 -> 7 after two pools
    expected = conv(1, 20, 5) + conv(20, 50, 5) + fc(50 * 7 * 7, 500) + fc(500, 50) + fc(50, 10)
    assert expected == 520 + 25_050 + 1_225_500 + 25_050 + 510 == 1_276_630
    assert n_params(m) == expected


def test_describe_architecture_mnist_cnn_matches_table9():
    m = MnistCNN()
    rows = describe_architecture(m, input_shape=(1, 28, 28))
    assert [(r["layer"], r["spec"]) for r in rows] == TABLE9
    assert [r["output_shape"] for r in rows] == [
        (20, 28, 28),
        (20, 14, 14),
        (50, 14, 14),
        (50, 7, 7),
        (500,),
        (50,),
        (10,),
    ]
    assert sum(r["params"] for r in rows) == n_params(m)
    assert [r["name"] for r in rows] == ["conv1", "pool1", "conv2", "pool2", "fc1", "fc2", "fc3"]
    # without input shape: no shapes, and the model's mode is untouched
    m.train()
    rows = describe_architecture(m)
    assert "output_shape" not in rows[0] and m.training


def test_mnist_cnn_dropout_slots_between_layers():
    m = MnistCNN(dropout=0.1, learnable_dropout=True)
    names = [n for n, _ in m.named_children()]
    drops = [n for n, mod in m.named_children() if isinstance(mod, ConcreteDropout)]
    assert drops == ["drop1", "drop2", "drop3", "drop4"]
    # after pool1, pool2, relu3 (FC-500), relu4 (FC-50); never after the output layer
    assert [names[names.index(d) - 1] for d in drops] == ["pool1", "pool2", "relu3", "relu4"]
    assert names[-1] == "fc3"
    params = concrete_dropout_parameters(m)
    assert len(params) == 4
    assert all(float(torch.sigmoid(p.detach())) == pytest.approx(0.1, rel=1e-5) for p in params)
    assert n_params(m) == 1_276_630 + 4
    x = torch.randn(3, 1, 28, 28)
    m.eval()
    torch.testing.assert_close(m(x), m(x))
    m.train()
    torch.manual_seed(0)
    m(x).sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in params)
    # fixed-rate baseline uses plain dropout and adds no parameters
    base = MnistCNN(dropout=0.1)
    assert sum(isinstance(mod, nn.Dropout) for mod in base.modules()) == 4
    assert n_params(base) == 1_276_630
    rows = describe_architecture(m)
    assert sum(r["layer"] == "Concrete dropout" for r in rows) == 4


# ------------------------------------------------------------------------------------------- FixUp


def _fixup_expected(n: int, num_classes: int = 10) -> int:
    stem = conv(3, 16, 3, bias=False) + 1  # conv + bias1
    scalars = 5  # bias1a, bias1b, bias2a, bias2b, scale
    total = stem
    cin = 16
    for c in (16, 32, 64):
        for _ in range(n):
            total += conv(cin, c, 3, bias=False) + conv(c, c, 3, bias=False) + scalars
            cin = c
    return total + 1 + fc(64, num_classes)  # bias2 + linear


def test_fixup_parameter_counts_and_shapes():
    r8, r14 = build_model("fixup_resnet8"), build_model("fixup_resnet14")
    assert _fixup_expected(1) == 74_827 and _fixup_expected(2) == 171_610
    assert n_params(r8) == 74_827
    assert n_params(r14) == 171_610
    assert len(r8.blocks()) == 3 and len(r14.blocks()) == 6
    x = torch.randn(2, 3, 32, 32)
    assert r8(x).shape == (2, 10) and r14(x).shape == (2, 10)
    # FixUp scalars are the shared Scale/Bias modules (so partitioning can find them)
    assert sum(isinstance(m, Scale) for m in r14.modules()) == 6
    assert sum(isinstance(m, Bias) for m in r14.modules()) == 4 * 6 + 2
    assert not any(isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)) for m in r14.modules())
    wide = FixupResNet(depth=8, width=2, num_classes=100)
    assert wide(x).shape == (2, 100) and wide.fc.in_features == 128
    with pytest.raises(ValueError):
        FixupResNet(depth=10)


@pytest.mark.parametrize("depth", [8, 14])
def test_fixup_init_makes_residual_branches_zero(depth):
    torch.manual_seed(0)
    net = FixupResNet(depth=depth)
    inputs = {}

    def record(mod, inp, out):
        inputs[mod] = (inp[0], out)  # returns None: the output is not replaced

    hooks = [b.register_forward_hook(record) for b in net.blocks()]
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        out = net(x)
    for h in hooks:
        h.remove()
    assert torch.count_nonzero(out) == 0  # zero-init classifier
    assert len(inputs) == len(net.blocks())
    with torch.no_grad():
        for blk, (xin, xout) in inputs.items():
            assert torch.count_nonzero(blk.branch(xin)) == 0
            torch.testing.assert_close(xout, torch.relu(blk.shortcut(xin)))
            if not blk.downsample:
                torch.testing.assert_close(xout, xin)  # identity through the block (xin >= 0)
            else:
                assert xout.shape[1] == 2 * xin.shape[1] and xout.shape[-1] == xin.shape[-1] // 2
                assert torch.count_nonzero(xout[:, xin.shape[1] :]) == 0  # zero-padded channels
                torch.testing.assert_close(xout[:, : xin.shape[1]], xin[:, :, ::2, ::2])
    # the check is not vacuous: a non-zero last conv makes the branch non-zero
    blk, (xin, _) = next(iter(inputs.items()))
    with torch.no_grad():
        blk.conv2.weight.normal_()
        assert torch.count_nonzero(blk.branch(xin)) > 0


def test_fixup_init_scaling():
    torch.manual_seed(0)
    net = FixupResNet(depth=14)
    L = 6  # residual branches; m = 2 layers per branch -> factor L^{-1/(2m-2)} = L^{-1/2}
    blk = net.layer3[1]
    w = blk.conv1.weight
    target = math.sqrt(2.0 / (w.shape[0] * 9)) * L**-0.5
    assert float(w.detach().std()) == pytest.approx(target, rel=0.05)
    assert all(torch.count_nonzero(b.conv2.weight) == 0 for b in net.blocks())
    assert torch.count_nonzero(net.fc.weight) == 0 and torch.count_nonzero(net.fc.bias) == 0
    assert all(float(m.scale.detach()) == 1.0 for m in net.modules() if isinstance(m, Scale))
    assert all(float(m.bias.detach()) == 0.0 for m in net.modules() if isinstance(m, Bias))
    # shallower net -> larger init (L = 3)
    w8 = FixupResNet(depth=8).layer3[0].conv1.weight
    assert float(w8.detach().std()) == pytest.approx(math.sqrt(2.0 / (64 * 9)) * 3**-0.5, rel=0.05)


def test_fixup_skip_pool_kernel_2_averages():
    blk = FixupBasicBlock(4, 8, stride=2, skip_pool_kernel=2)
    x = torch.rand(1, 4, 6, 6)
    s = blk.shortcut(x)
    torch.testing.assert_close(s[:, :4], torch.nn.functional.avg_pool2d(x, 2))
    assert torch.count_nonzero(s[:, 4:]) == 0


# -------------------------------------------------------------------------------------- Wide ResNets


def _count_3x3(mods):
    return sum(isinstance(m, nn.Conv2d) and m.kernel_size == (3, 3) for mod in mods for m in mod.modules())


def test_wrn_depth_conventions_and_counts():
    assert wrn_blocks_per_stage(20) == 3  # 6n + 2
    assert wrn_blocks_per_stage(28) == 4  # 6n + 4 (WRN-28-10)
    assert wrn_blocks_per_stage(16) == 2
    assert wrn_blocks_per_stage(50) == 8
    with pytest.raises(ValueError):
        wrn_blocks_per_stage(21)
    net = WideResNet(depth=20, width=1)
    # Table 3: first two of three stages of WRN-20 = 13 convolution layers (stem + 2 x 3 x 2)
    assert _count_3x3([net.conv1, net.stage1, net.stage2]) == 13
    # by hand (BatchNorm: 2 params / channel): stem, stage1, stage2, stage3, final norm, fc
    bn = lambda c: 2 * c  # noqa: E731
    stage1 = 3 * (2 * conv(16, 16, 3, False) + 2 * bn(16))
    stage2 = (conv(16, 32, 3, False) + conv(32, 32, 3, False) + 16 * 32 + bn(16) + bn(32)) + 2 * (
        2 * conv(32, 32, 3, False) + 2 * bn(32)
    )
    stage3 = (conv(32, 64, 3, False) + conv(64, 64, 3, False) + 32 * 64 + bn(32) + bn(64)) + 2 * (
        2 * conv(64, 64, 3, False) + 2 * bn(64)
    )
    expected = conv(3, 16, 3, False) + stage1 + stage2 + stage3 + bn(64) + fc(64, 10)
    assert n_params(net) == expected == 272_282
    assert net(torch.randn(2, 3, 32, 32)).shape == (2, 10)
    wide = WideResNet(depth=16, width=4, norm="group", gn_groups=4)
    assert wide.fc.in_features == 256
    assert all(m.num_groups == 4 for m in wide.modules() if isinstance(m, nn.GroupNorm))
    assert not any(isinstance(m, nn.BatchNorm2d) for m in wide.modules())


def test_resnet50_gn_structure():
    net = resnet50_gn()
    # 50 weight layers: 48 block convs + stem conv + final linear (1x1 shortcut projections not counted)
    assert _count_3x3([net]) + sum(isinstance(m, nn.Linear) for m in net.modules()) == 50
    gns = [m for m in net.modules() if isinstance(m, nn.GroupNorm)]
    assert gns and all(m.num_groups == 2 for m in gns)
    assert not any(isinstance(m, nn.BatchNorm2d) for m in net.modules())
    assert net.blocks_per_stage == 8 and len(net.stage1) == 8
    assert net.fc.in_features == 64 and net.fc.out_features == 200
    assert net(torch.randn(2, 3, 64, 64)).shape == (2, 200)


def test_resnet9_gn_count_dropout_slots_and_shapes():
    net = ResNet9GN()
    gn = lambda c: 2 * c  # noqa: E731
    expected = (
        conv(3, 64, 3)
        + gn(64)
        + conv(64, 128, 3)
        + gn(128)
        + 2 * (conv(128, 128, 3) + gn(128))
        + conv(128, 256, 3)
        + gn(256)
        + conv(256, 512, 3)
        + gn(512)
        + 2 * (conv(512, 512, 3) + gn(512))
        + fc(512, 10)
    )
    assert expected == 6_575_370  # the Dys ResNet-9's published count (BN -> GN keeps it)
    assert n_params(net) == expected
    assert all(m.num_groups == 2 for m in net.modules() if isinstance(m, nn.GroupNorm))
    x = torch.randn(2, 3, 32, 32)
    assert net(x).shape == (2, 10)
    learn = ResNet9GN(dropout=0.1, learnable_dropout=True)
    assert isinstance(learn.res1.dropout, ConcreteDropout) and isinstance(learn.res2.dropout, ConcreteDropout)
    assert len(concrete_dropout_parameters(learn)) == 2
    # the slot sits between the two conv blocks of each residual block
    assert [n for n, _ in learn.res1.named_children()] == ["block1", "dropout", "block2"]
    learn.eval()
    torch.testing.assert_close(learn(x), learn(x))


# ---------------------------------------------------------------------------------------- registry


def test_registry_names_and_errors():
    names = model_names()
    for n in ["mnist_cnn", "fixup_resnet8", "fixup_resnet14", "wrn", "resnet50_gn", "resnet9_gn", "mlp"]:
        assert n in names
    with pytest.raises(KeyError) as err:
        build_model("resnet1000")
    for n in names:
        assert n in str(err.value)
    assert isinstance(build_model("FixUp-ResNet8"), FixupResNet)
    assert build_model("fixup_resnet14", num_classes=3)(torch.randn(1, 3, 32, 32)).shape == (1, 3)
    assert build_model("wrn", depth=16, width=2).width == 2
    m = build_model("mnist_cnn", dropout=0.1, learnable_dropout=True)
    assert len(concrete_dropout_parameters(m)) == 4


def test_registry_mlp():
    pytest.importorskip("reprokit.models.mlp")
    m = build_model("mlp", in_features=30, hidden=[256, 256], out_features=2)
    assert m(torch.randn(5, 30)).shape == (5, 2)
    assert n_params(m) == fc(30, 256) + fc(256, 256) + fc(256, 2)
    rows = describe_architecture(m)
    assert [r["spec"] for r in rows] == [
        "units=256, activation=GELU",
        "units=256, activation=GELU",
        "units=2, activation=Softmax",
    ]
