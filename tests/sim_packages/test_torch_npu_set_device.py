"""The stand-in torch_npu offers set_device/current_device as the real one does (issue 25 item 10: the
full tier's npu.matmul and hccl.allreduce errored on `torch_npu.npu` having no `set_device`): the files
sim/packages builds into the wheel, imported by this venv's torch over a scratch root with two chips."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from ascend_ready.sim.hw.state import initial_state
from ascend_ready.sim.packages.wheels import torch_npu_files


def _run(tmp_path, code: str, pythonpath=()) -> subprocess.CompletedProcess:
    import torch

    version = torch.__version__.split("+")[0]  # built for this torch, as the matrix pins them together
    for rel, text in torch_npu_files(version).items():
        path = tmp_path / "site" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    fs = tmp_path / "fs"
    (fs / "dev").mkdir(parents=True)
    (fs / "lib").mkdir()
    for name in ("davinci0", "davinci1", "davinci_manager", "devmm_svm", "hisi_hdc"):
        (fs / "dev" / name).touch()
    for name in ("libhccl.so", "libascendcl.so"):
        (fs / "lib" / name).touch()
    simdir = tmp_path / "simdir"  # the simulated driver's state, as ascend-sim writes it (sim/hw/simdir.py)
    simdir.mkdir()
    state = initial_state("atlas-800t-a2", node_index=1, node_name="node01")
    (simdir / "state.json").write_text(json.dumps(state))
    path = os.pathsep.join([*map(str, pythonpath), str(tmp_path / "site")])
    env = {**os.environ, "PYTHONPATH": path, "ASCEND_SIM_FSROOT": str(fs),
           "LD_LIBRARY_PATH": "/lib", "ASCEND_SIM_ROOT": str(simdir)}
    env.pop("ASCEND_RT_VISIBLE_DEVICES", None)
    return subprocess.run([sys.executable, "-c", "import torch, torch_npu\n" + code], env=env,
                          capture_output=True, text=True, timeout=300)


def test_set_device_keeps_the_current_device_and_refuses_one_the_runtime_does_not_see(tmp_path):
    code = ("n = torch.npu\nprint(n.current_device())\nn.set_device(1)\nprint(n.current_device())\n"
            "n.set_device('npu:0')\nprint(torch_npu.npu.current_device())\n"
            "for bad in (2, -1):\n"
            "    try:\n        n.set_device(bad)\n    except RuntimeError as e:\n        print('error', e)\n")
    proc = _run(tmp_path, code)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[:3] == ["0", "1", "0"]
    assert lines[3] == "error NPU function error: aclrtSetDevice(device), error code is 107001"
    assert lines[4].startswith("rtSetDevice:ErrCode=107001, desc=[device id error]")
    assert lines[5] == "error device id must be positive!"


def test_the_npu_device_computes_on_the_cpu_and_hccl_all_reduces_over_gloo(tmp_path):
    # what the full tier's collective worker does on an NPU (checks/cluster/collective_worker.py), in one
    # process: a tensor on npu:1, a matmul, synchronize, an hccl group, an all-reduce and a barrier
    code = ("import torch.distributed as dist\n"
            "print(torch.accelerator.current_accelerator())\n"  # none until the job asks for a device
            "torch.npu.set_device(1)\n"
            "d = torch.device('npu', torch.npu.current_device())\n"
            "a = torch.randn(8, 8, device=d, dtype=torch.bfloat16)\n"
            "print(d, a.device, (a @ a).shape, torch.ones(2).npu().sum())\n"
            "torch.npu.synchronize()\n"
            "torch.npu.synchronize(1)\n"  # a device to wait for, as the full tier's pair copies pass it
            "store = dist.FileStore(" + repr(str(tmp_path / "store")) + ", 1)\n"
            "dist.init_process_group('hccl', store=store, rank=0, world_size=1)\n"
            "t = torch.ones(4, device=d)\n"
            "dist.all_reduce(t)\n"
            "dist.barrier()\n"
            "print(dist.get_backend(), t.tolist())\n"
            "dist.destroy_process_group()\n"
            "from torch.utils.data import DataLoader\n"  # the Trainer's loader pins for the accelerator
            "print([b.tolist() for b in DataLoader([1, 2], batch_size=2, pin_memory=True)])\n")
    proc = _run(tmp_path, code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["None", "npu:1 cpu torch.Size([8, 8]) tensor(2.)",
                                     "hccl [1.0, 1.0, 1.0, 1.0]", "[[1, 2]]"]


def test_get_device_name_is_the_soc_name_the_runtime_reports(tmp_path):
    """torch.npu.get_device_name(N) is 'Ascend' and the chip npu-smi names ('Ascend910B3', as torch_npu
    reports it: LlamaFactory#6671's environment); the SDC worker records it per device (npu.sdc errored
    on its absence). An id the runtime does not see fails."""
    code = ("print(torch.npu.get_device_name(0), torch_npu.npu.get_device_name('npu:1'))\n"
            "torch.npu.set_device(1)\nprint(torch.npu.get_device_name())\n"
            "try:\n    torch.npu.get_device_name(2)\nexcept RuntimeError as e:\n    print('error', e)\n")
    proc = _run(tmp_path, code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["Ascend910B3 Ascend910B3", "Ascend910B3",
                                        "error NPU function error: aclrtGetSocName, error code is 107001 "
                                        "(invalid device=2)"]


def test_the_npu_device_multiplies_fp16_as_the_cube_does_fast_and_under_the_sdc_fault(tmp_path):
    """fp16 matmuls on the emulated device accumulate in fp32 and round once, as an NPU's cube does (the CPU's
    own fp16 kernel took 43 s for one 2048^3 product here: the full tier's probes took minutes per
    device); with the sdc fault's hook on (sim/hw/sdc_hook.py) the flipped bit is the fp16 result's."""
    from pathlib import Path

    import ascend_ready.sim.hw as hw

    site = tmp_path / "site"
    site.mkdir()
    fault = tmp_path / "fs" / "var/lib/ascend-sim/runtime/sdc.json"
    fault.parent.mkdir(parents=True)
    fault.write_text(json.dumps({"device": 0, "bit": 3, "index": 0, "kernel": "matmul"}))
    (site / "sitecustomize.py").write_text((Path(hw.__file__).parent / "sdc_hook.py").read_text())
    code = ("import time\n"
            "torch.npu.set_device(0)\n"
            "g = torch.Generator().manual_seed(1)\n"
            "a, b = (torch.randn(2048, 2048, generator=g).half() for _ in range(2))\n"
            "want = torch.mm(a.float(), b.float()).half()\n"
            "t = time.perf_counter()\n"
            "outs = [torch.matmul(a, b), torch.mm(a, b), a @ b, a.mm(b),\n"
            "        torch.mm(a, b, out=torch.empty_like(a))]\n"
            "took = time.perf_counter() - t\n"
            "bits = lambda x: x.view(-1).view(torch.int16)\n"
            "print(took < 15, [int((bits(o) != bits(want)).sum()) for o in outs],\n"
            "      int(bits(outs[0])[0] ^ bits(want)[0]), outs[0].dtype)\n"
            "x = torch.randn(4, 4, generator=g)\n"  # fp32: the CPU's kernel, the hook on torch.matmul
            "got, plain = torch.matmul(x, x).view(-1), torch.mm(x, x).view(-1)\n"
            "i32 = lambda x: int(x[:1].view(torch.int32))\n"
            "print(bool(torch.equal(got[1:], plain[1:])), i32(got) ^ i32(plain))\n")
    proc = _run(tmp_path, code, pythonpath=(site,))
    assert proc.returncode == 0, proc.stderr
    # only torch.matmul carries the hook (the SDC worker's kernel); the others are the plain cube
    assert proc.stdout.splitlines() == ["True [1, 0, 0, 0, 0] 8 torch.float16", "True 8"]


def test_the_burn_in_load_runs_a_rank_per_npu_and_all_reduces_them_over_hccl(tmp_path):
    """The burn-in's load on a node of two emulated NPUs: one forked rank per device, each round its
    copies, matmuls and an hccl all-reduce across the two (checks/resources/burn_in.py)."""
    from ascend_ready.checks.resources.burn_in import BURN_IN_CODE, parse_burn_in

    code = f"exec(compile({BURN_IN_CODE!r}, 'burn-in', 'exec'))\n_burn_ranks(2, 'npu', 2)\n"
    proc = _run(tmp_path, code)
    assert proc.returncode == 0, proc.stderr
    run = parse_burn_in("ascend-check burn-in v1 duration 2 interval 1\n@@burn-in at 0\n@@burn-in load rc 0\n"
                        + proc.stdout + "@@burn-in load stderr\n")
    assert run.rounds and all(set(r.matmul) == set(r.allreduce) == {"0", "1"} for r in run.rounds)
    first = run.rounds[0].copies
    assert (first.device, first.count, sorted(first.p2p)) == ("npu", 2, [(0, 1), (1, 0)])
