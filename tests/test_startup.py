"""Cell start-up cuts change no numbers: reprokit._startup.prepare() keeps torch._dynamo out of a process
that builds and steps optimisers, with bit-identical parameters."""

import json
import subprocess
import sys

TRAIN = r"""
import hashlib, json, sys, torch
if {prepare}:
    from reprokit import _startup
    _startup.prepare()
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.GELU(), torch.nn.Linear(16, 2))
opts = [torch.optim.Adam(m[0].parameters(), lr=1e-2, weight_decay=1e-3),
        torch.optim.SGD([m[2].weight], lr=1e-2, momentum=0.9, weight_decay=1e-4),
        torch.optim.AdamW([m[2].bias], lr=1e-2)]
sched = torch.optim.lr_scheduler.CosineAnnealingLR(opts[0], T_max=30)
x, y = torch.randn(32, 6), torch.randint(0, 2, (32,))
for i in range(30):
    for o in opts:
        o.zero_grad()
    torch.nn.functional.cross_entropy(m(x), y).backward()
    for o in opts:
        o.step()
    sched.step()
    if i == 10:
        for o in opts:
            o.load_state_dict(o.state_dict())
digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in m.parameters())).hexdigest()
print(json.dumps({{"digest": digest, "dynamo": "torch._dynamo" in sys.modules}}))
"""


def _train(prepare: bool, env_extra: dict | None = None) -> dict:
    import os

    env = {**os.environ, **(env_extra or {})}
    out = subprocess.run(
        [sys.executable, "-c", TRAIN.format(prepare=prepare)], capture_output=True, text=True, check=True, env=env
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_prepare_keeps_dynamo_out_with_bit_identical_parameters():
    default, prepared = _train(False), _train(True)
    assert default["dynamo"]  # torch 2.x: building an optimiser imports torch._dynamo
    assert not prepared["dynamo"]
    assert prepared["digest"] == default["digest"]


def test_prepare_can_be_switched_off():
    assert _train(True, {"REPROKIT_KEEP_DYNAMO_IMPORT": "1"})["dynamo"]


def test_prepared_wrappers_defer_to_dynamo_once_it_is_imported():
    code = r"""
import sys, torch
from reprokit import _startup
_startup.prepare()
import torch._dynamo
calls = []
real = torch._dynamo.disable
torch._dynamo.disable = lambda fn, recursive=True, wrapping=True: (calls.append(fn.__name__), real(fn, recursive, wrapping=wrapping))[1]
m = torch.nn.Linear(2, 1)
opt = torch.optim.Adam(m.parameters())
m(torch.ones(1, 2)).sum().backward()
opt.step()
opt.zero_grad()
print(sorted(set(calls)))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "add_param_group" in out and "zero_grad" in out
