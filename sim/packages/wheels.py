"""Stand-in `torch` and `torch_npu` wheels for the simulator's local wheelhouse.

Pure-Python, a few kB each, but tagged like the real binary wheels (cp3X-cp3X[m]-manylinux_2_NN_<arch>)
so pip's tag matching and a glibc-floor check behave as they do with the real ones. Nodes that train get
the real CPU torch instead, under the stack's version (relabel_wheel): the simulator's choice, since a
simulated node trains on CPU and only one CPU torch build is at hand (docs/design/simulator.md).
"""

from __future__ import annotations

import base64
import hashlib
import re
import zipfile
from pathlib import Path

from ascend_ready.errors import ConfigError

_ZIP_DATE = (1980, 1, 1, 0, 0, 0)
# glibc floor -> PEP 600 tag, with the legacy alias pip < 20.3 understands (2014 == 2.17).
_LEGACY_ALIAS = {"2.17": "manylinux2014", "2.12": "manylinux2010", "2.5": "manylinux1"}


def python_tags(python: str) -> tuple[str, str]:
    """("cp36", "cp36m") for "3.6"; the `m` ABI suffix exists up to 3.7."""
    m = re.fullmatch(r"(?:cp)?3\.?(\d+)", python)
    if not m:
        raise ConfigError(f"python version {python!r} is not of the form 3.X",
                          hint="use e.g. '3.9' or 'cp39'")
    minor = int(m.group(1))
    tag = f"cp3{minor}"
    return tag, tag + ("m" if minor <= 7 else "")


def platform_tag(glibc: str, arch: str) -> str:
    """Compressed platform tag set carrying the glibc floor: manylinux_2_17_x86_64.manylinux2014_x86_64...

    `linux_<arch>` is appended to the 2.17 floor only, because the pip 18.1 that Python 3.6 ships knows no
    manylinux2014 tag (the floor stays readable from the manylinux_2_NN part). A newer floor carries no such
    alias, as the real wheels do not: a glibc 2.17 node's pip, old or new, refuses a manylinux_2_28 wheel.
    """
    if not re.fullmatch(r"2\.\d+", glibc):
        raise ConfigError(f"glibc floor {glibc!r} is not of the form 2.NN", hint="use e.g. '2.17' or '2.28'")
    tags = [f"manylinux_{glibc.replace('.', '_')}_{arch}"]
    if glibc in _LEGACY_ALIAS:
        tags.append(f"{_LEGACY_ALIAS[glibc]}_{arch}")
    if glibc in _LEGACY_ALIAS:
        tags.append(f"linux_{arch}")
    return ".".join(tags)


def glibc_floor(wheel_name: str) -> str | None:
    """The glibc floor a wheel file name declares ("2.28"), or None when it has no manylinux_2_NN tag."""
    m = re.search(r"manylinux_2_(\d+)_", wheel_name)
    return f"2.{m.group(1)}" if m else None


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def build_wheel(dest: Path, name: str, version: str, python: str, glibc: str, arch: str,
                files: dict[str, str], summary: str) -> Path:
    """Write one wheel; `files` maps paths inside the wheel to their text."""
    py, abi = python_tags(python)
    plat = platform_tag(glibc, arch)
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    minor = py[3:]
    contents = dict(files)
    contents[f"{info}/METADATA"] = (
        "Metadata-Version: 2.1\n"
        f"Name: {name}\n"
        f"Version: {version}\n"
        f"Summary: {summary}\n"
        f"Requires-Python: ==3.{minor}.*\n"
    )
    contents[f"{info}/WHEEL"] = (
        "Wheel-Version: 1.0\n"
        "Generator: ascend-ready-sim\n"
        "Root-Is-Purelib: false\n"
        + "".join(f"Tag: {py}-{abi}-{p}\n" for p in plat.split("."))
    )
    contents[f"{info}/top_level.txt"] = f"{dist}\n"
    record_lines = []
    path = dest / f"{dist}-{version}-{py}-{abi}-{plat}.whl"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for arcname in sorted(contents):
            data = contents[arcname].encode()
            zf.writestr(zipfile.ZipInfo(arcname, _ZIP_DATE), data)
            record_lines.append(f"{arcname},{_record_hash(data)},{len(data)}")
        record_lines.append(f"{info}/RECORD,,")
        zf.writestr(zipfile.ZipInfo(f"{info}/RECORD", _ZIP_DATE), "\n".join(record_lines) + "\n")
    return path


def relabel_wheel(src: Path, dest: Path, version: str, platform: str | None = None) -> Path:
    """A copy of the wheel `src` into directory `dest` whose distribution version is `version` (file name,
    .dist-info directory, METADATA and RECORD); its modules are untouched, so the code still tells its
    own version at run time (torch.__version__). How the simulator offers its one real CPU torch under a
    stack's pinned torch version: pip, the package check and the fingerprint see the pin. `platform` (a
    compressed tag set, platform_tag) replaces the wheel's platform tags, so that it carries the glibc floor
    of the stack's real torch wheels (manylinux2014 up to torch 2.5, manylinux_2_28 from 2.6)."""
    parts = src.name[:-4].split("-")
    if len(parts) < 5 or not src.name.endswith(".whl"):
        raise ConfigError(f"{src}: not a wheel file name (dist-version-py-abi-plat.whl)")
    dist, old = parts[0], parts[1]
    old_info, new_info = f"{dist}-{old}.dist-info/", f"{dist}-{version}.dist-info/"
    py, abi = parts[-3], parts[-2]
    plat = platform or parts[-1]
    out = dest / ("-".join([dist, version, *parts[2:-1], plat]) + ".whl")
    part = out.with_suffix(".part")
    record: list[str] = []
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(part, "w", compression=zipfile.ZIP_DEFLATED,
                                                      compresslevel=1) as zout:
        for info in zin.infolist():
            name = info.filename
            if name == f"{old_info}RECORD":
                continue
            data = zin.read(info)
            if name.startswith(old_info):
                name = new_info + name[len(old_info):]
                if name == f"{new_info}METADATA":
                    data = re.sub(rb"^Version: .*$", f"Version: {version}".encode(), data, count=1,
                                  flags=re.MULTILINE)
                elif name == f"{new_info}WHEEL" and platform:
                    kept = [ln for ln in data.decode().splitlines(keepends=True) if not ln.startswith("Tag:")]
                    tags = [f"Tag: {py}-{abi}-{p}\n" for p in plat.split(".")]
                    data = "".join(kept + tags).encode()
            copied = zipfile.ZipInfo(name, info.date_time)
            copied.external_attr = info.external_attr
            copied.compress_type = zipfile.ZIP_DEFLATED
            zout.writestr(copied, data, compresslevel=1)
            record.append(f"{name},{_record_hash(data)},{len(data)}")
        record.append(f"{new_info}RECORD,,")
        zout.writestr(zipfile.ZipInfo(f"{new_info}RECORD", _ZIP_DATE), "\n".join(record) + "\n")
    part.replace(out)
    return out


def torch_files(version: str) -> dict[str, str]:
    """A `torch` that imports and tells its version, nothing more."""
    return {
        "torch/__init__.py": (
            '"""Stand-in torch from the ascend-ready simulator: reports its version, computes nothing."""\n'
            "from torch.version import __version__\n"
        ),
        "torch/version.py": f"__version__ = {version!r}\ngit_version = 'ascend-ready-sim'\n",
    }


def _base(version: str) -> str:
    m = re.match(r"(\d+)\.(\d+)\.(\d+)", version)
    if not m:
        raise ConfigError(f"version {version!r} does not start with major.minor.patch")
    return ".".join(m.groups())


#: `torch_npu/_emulated.py` of the stand-in: the `npu` device and the `hccl` process-group backend as the
#: real torch_npu registers them (PrivateUse1 renamed `npu`, the device module, `Tensor.npu()`), emulated on
#: this machine's CPU, so that code written for an NPU runs unchanged on a simulated node: a tensor made
#: on `npu:N` is a CPU tensor (the factories' PrivateUse1 kernels allocate on the CPU, every op after them
#: dispatches to the CPU's), `torch.npu.synchronize()` has nothing to wait for, pinned memory is a copy,
#: and `hccl` is a gloo group (its collectives take those CPU tensors). What the device computes is the
#: CPU's, at the CPU's speed: npu.matmul judges those figures, never an NPU's. Not faithful: the device
#: comes up at the process's first `set_device`, not at `import torch_npu` (a job on the CPU, as the
#: simulated nodes train, never meets it: torch.accelerator stays the CPU there). It needs torch's Python
#: backend hooks (`torch.utils.backend_registration._setup_privateuseone_for_python_backend`, in this
#: machine's torch); on a torch without them, or the version-only stand-in torch, no device comes up.
EMULATED_NPU = (
    "import torch\n"
    "\n"
    "import torch_npu.npu as _npu\n"
    "\n"
    "_kernels = []  # the torch.library.Library objects: a kernel lives as long as its library does\n"
    "\n"
    "\n"
    "def _empty(size, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):\n"
    "    return torch.empty(size, dtype=dtype, device='cpu', memory_format=memory_format)\n"
    "\n"
    "\n"
    "def _empty_strided(size, stride, dtype=None, layout=None, device=None, pin_memory=None):\n"
    "    return torch.empty_strided(size, stride, dtype=dtype, device='cpu')\n"
    "\n"
    "\n"
    "def _pin_memory(self, device=None):\n"
    "    return self.clone()  # host memory of the emulated device is ordinary memory: a copy, as pinning\n"
    "\n"
    "\n"
    "def _is_pinned(self, device=None):\n"
    "    return False\n"
    "\n"
    "\n"
    "def _gloo(store, rank, size, timeout):\n"
    "    import torch.distributed as dist\n"
    "    return dist.ProcessGroupGloo(store, rank, size, timeout)\n"
    "\n"
    "\n"
    "def _as_the_cube(fn):\n"
    "    # An NPU's cube unit multiplies fp16 with fp32 accumulation and rounds the result to fp16 once.\n"
    "    # The CPU's own fp16 matmul has no BLAS behind it on many hosts (here a 2048^3 one took 43 s\n"
    "    # against 0.13 s in fp32), so the full tier's fp16 probes (npu.flops' 4096^3 torch.mm, the SDC\n"
    "    # worker, the burn-in load) took minutes per device: the emulated device computes fp16 as the cube\n"
    "    # does. Beneath the sdc fault's hook when it is on (sim/hw/sdc_hook.py), whose bit flip then lands\n"
    "    # on the fp16 result, as a faulty device returns it.\n"
    "    fault = getattr(fn, 'ascend_sim_fault', None)\n"
    "    compute = fn if fault is None else fn.__wrapped__\n"
    "\n"
    "    def run(a, b, *args, out=None, **kwargs):\n"
    "        half = all(getattr(x, 'dtype', None) is torch.float16 for x in (a, b))\n"
    "        if args or kwargs or not half:\n"
    "            return fn(a, b, *args, **kwargs) if out is None else fn(a, b, *args, out=out, **kwargs)\n"
    "        c = compute(a.float(), b.float()).to(torch.float16)\n"
    "        if fault is not None:\n"
    "            c = fault(c)\n"
    "        if out is None:\n"
    "            return c\n"
    "        return out.copy_(c)\n"
    "\n"
    "    run.__wrapped__ = fn\n"
    "    return run\n"
    "\n"
    "\n"
    "def bring_up():\n"
    "    # The npu device, at the process's first set_device (as torch_npu initialises the device runtime\n"
    "    # lazily), so that a job on the CPU never meets it. Once per process.\n"
    "    if _kernels:\n"
    "        return\n"
    "    try:\n"
    "        from torch.utils import backend_registration as reg\n"
    "        setup, hooks, guard = (reg._setup_privateuseone_for_python_backend,\n"
    "                               torch._C._acc.PrivateUse1Hooks, torch._C._acc.DeviceGuard)\n"
    "    except (ImportError, AttributeError):\n"
    "        return  # no Python backend hooks in this torch: no npu device (torch.npu still counts chips)\n"
    "\n"
    "    class Hooks(hooks):\n"
    "        def is_available(self):\n"
    "            return _npu.is_available()\n"
    "\n"
    "        def has_primary_context(self, dev_id):\n"
    "            return True\n"
    "\n"
    "        def is_built(self):\n"
    "            return True\n"
    "\n"
    "    class Guard(guard):\n"
    "        def type_(self):\n"
    "            return torch._C._autograd.DeviceType.PrivateUse1\n"
    "\n"
    "    if getattr(torch, 'npu', None) is _npu:\n"
    "        del torch.npu  # registered again below, as the device module of the renamed PrivateUse1\n"
    "    setup(rename='npu', backend_module=_npu, hook=Hooks(), device_guard=Guard())\n"
    "    device = torch.library.Library('aten', 'IMPL', 'PrivateUse1')\n"
    "    device.impl('empty.memory_format', _empty)\n"
    "    device.impl('empty_strided', _empty_strided)\n"
    "    host = torch.library.Library('aten', 'IMPL', 'CPU')  # DataLoader(pin_memory=True) pins for npu\n"
    "    host.impl('_pin_memory', _pin_memory)\n"
    "    host.impl('is_pinned', _is_pinned)\n"
    "    _kernels.extend((device, host))\n"
    "    torch.matmul, torch.mm = _as_the_cube(torch.matmul), _as_the_cube(torch.mm)\n"
    "    t = torch.Tensor\n"
    "    t.__matmul__, t.matmul, t.mm = (_as_the_cube(f) for f in (t.__matmul__, t.matmul, t.mm))\n"
    "\n"
    "\n"
    "def _register_backend():\n"
    "    try:\n"
    "        import torch.distributed as dist\n"
    "    except ImportError:\n"
    "        return  # the version-only stand-in torch\n"
    "    if dist.is_available() and 'hccl' not in dist.Backend.backend_list:\n"
    "        dist.Backend.register_backend('hccl', _gloo, devices=['cpu', 'npu'])\n"
    "\n"
    "\n"
    "_register_backend()\n"
)


def torch_npu_files(version: str) -> dict[str, str]:
    """A `torch_npu` that fails on import like the real one when torch or the CANN environment is wrong.

    - torch of another major.minor.patch: the real extension fails to link against libtorch (the installed
      torch distribution's version, which relabel_wheel sets, from the .dist-info beside the torch package
      imported; torch.__version__ where there is none);
    - no libhccl.so on LD_LIBRARY_PATH (CANN set_env.sh not sourced): `from torch_npu import _C` fails
      with the loader's message (sample error_torch-npu_libhccl-not-found). ASCEND_SIM_FSROOT, set only by
      tests that install into a scratch root, is prefixed to the searched directories (and to /dev);
    - `torch_npu.npu` (also `torch.npu`) counts the node's /dev/davinciN chips this process may open
      (read and write, as the driver's mode 660 HwHiAiUser:HwHiAiUser allows its group), and none when the
      manager devices (davinci_manager, devmm_svm, hisi_hdc) are not open to it, honouring
      ASCEND_RT_VISIBLE_DEVICES: is_available() is False on a node without them;
    - `set_device(N | 'npu:N' | torch.device)` / `current_device()` keep the current device as torch_npu
      does, refusing a negative id and one the runtime does not see with torch_npu's own errors;
    - on a real (CPU) torch, the `npu` device and the `hccl` backend exist as torch_npu registers them, run on
      this machine's CPU and gloo (EMULATED_NPU).
    """
    base = _base(version)
    init = (
        '"""Stand-in torch_npu from the ascend-ready simulator (import checks only)."""\n'
        "import os\n"
        "\n"
        "import torch\n"
        "\n"
        f"__version__ = {version!r}\n"
        f"_TORCH_BASE = {base!r}\n"
        "\n"
        "\n"
        "def _torch_base(v):\n"
        "    return '.'.join(v.split('+')[0].split('.')[:3])\n"
        "\n"
        "\n"
        "def _installed_torch():\n"
        "    # the distribution beside the torch package imported (its .dist-info), else what it says\n"
        "    site = os.path.dirname(os.path.dirname(os.path.abspath(torch.__file__)))\n"
        "    for entry in sorted(os.listdir(site)):\n"
        "        if entry.startswith('torch-') and entry.endswith('.dist-info'):\n"
        "            return entry[len('torch-'):-len('.dist-info')]\n"
        "    return torch.__version__\n"
        "\n"
        "\n"
        "_TORCH = _installed_torch()\n"
        "\n"
        "if _torch_base(_TORCH) != _TORCH_BASE:\n"
        "    _lib = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'lib', 'libtorch_npu.so')\n"
        "    raise ImportError(_lib + ': undefined symbol: _ZN3c1010TensorImpl15set_storage_offsetEl'\n"
        "                      ' (torch_npu ' + __version__ + ' is built for torch ' + _TORCH_BASE\n"
        "                      + ', found torch ' + _TORCH + ')')\n"
        "\n"
        "import torch_npu.npu  # noqa: E402\n"
        "\n"
        "import torch_npu._emulated  # noqa: E402,F401  (the npu device and the hccl backend, on CPU)\n"
        "\n"
        "torch.npu = torch_npu.npu  # the real torch_npu registers its device module as torch.npu\n"
        "\n"
        "\n"
        "def npu_fusion_attention(*args, **kwargs):\n"
        "    # the real torch_npu's fused attention op, which transformers imports wherever torch_npu is\n"
        "    # installed (transformers/integrations/npu_flash_attention.py); a CPU job never calls it\n"
        "    raise RuntimeError('npu_fusion_attention: the simulator stand-in computes nothing')\n"
        "\n"
        "\n"
        "def npu_rotary_mul(*args, **kwargs):\n"
        "    # the real torch_npu's fused rotary embedding op (its custom-op API), which transformers\n"
        "    # < 4.55 imports beside npu_fusion_attention; a CPU job never calls it\n"
        "    raise RuntimeError('npu_rotary_mul: the simulator stand-in computes nothing')\n"
    )
    npu = (
        "import os\n"
        "import re\n"
        "\n"
        "from torch_npu.utils import _should_print_warning  # noqa: F401\n"
        "\n"
        "\n"
        "_MANAGERS = ('davinci_manager', 'devmm_svm', 'hisi_hdc')\n"
        "\n"
        "\n"
        "def _devices():\n"
        "    # The chips the driver exposes (/dev/davinciN) that this process may open (HwHiAiUser group),\n"
        "    # in logical order; ASCEND_RT_VISIBLE_DEVICES picks logical ids from them as the runtime does.\n"
        "    # The runtime reaches every chip through the manager devices: without them it sees none.\n"
        "    dev = os.environ.get('ASCEND_SIM_FSROOT', '') + '/dev'\n"
        "    try:\n"
        "        names = os.listdir(dev)\n"
        "    except OSError:\n"
        "        return []\n"
        "    if not all(os.access(dev + '/' + m, os.R_OK | os.W_OK) for m in _MANAGERS):\n"
        "        return []\n"
        "    ids = sorted(int(n[7:]) for n in names if re.fullmatch(r'davinci[0-9]+', n))\n"
        "    found = [i for i in ids if os.access(dev + '/davinci%d' % i, os.R_OK | os.W_OK)]\n"
        "    visible = os.environ.get('ASCEND_RT_VISIBLE_DEVICES')\n"
        "    if visible is None:\n"
        "        return found\n"
        "    picked = []\n"
        "    for item in visible.split(','):\n"
        "        item = item.strip()\n"
        "        if not item.isdigit() or int(item) >= len(found) or found[int(item)] in picked:\n"
        "            break  # the runtime stops at the first invalid id\n"
        "        picked.append(found[int(item)])\n"
        "    return picked\n"
        "\n"
        "\n"
        "def device_count():\n"
        "    return len(_devices())\n"
        "\n"
        "\n"
        "def is_available():\n"
        "    return device_count() > 0\n"
        "\n"
        "\n"
        "def is_initialized():  # what torch asks of a device module (torch._register_device_module)\n"
        "    return True\n"
        "\n"
        "\n"
        "def _is_in_bad_fork():\n"
        "    return False\n"
        "\n"
        "\n"
        "# The process's current device, as torch_npu keeps it per thread (c10_npu::SetDevice and\n"
        "# GetDevice in torch_npu/csrc/core/npu/NPUFunctions.cpp): a negative id fails its TORCH_CHECK,\n"
        "# an id the runtime does not see fails aclrtSetDevice with 107001 'device id error' (the\n"
        "# runtime's words in the ascend-samples capture\n"
        "# error_runtime_107001-invalid-device-id-EE8888_gpustack-3352.txt).\n"
        "_current = [0]\n"
        "\n"
        "\n"
        "def _device_index(device):\n"
        "    # an int, 'npu', 'npu:N' or torch.device('npu', N), as torch_npu's _get_device_index takes\n"
        "    if isinstance(device, int):\n"
        "        return device\n"
        "    text = str(device)\n"
        "    kind, _, index = text.partition(':')\n"
        "    if kind != 'npu' or (index and not index.lstrip('-').isdigit()):\n"
        "        raise ValueError('Expected a npu device, but got: ' + text)\n"
        "    return int(index) if index else _current[0]\n"
        "\n"
        "\n"
        "def set_device(device):\n"
        "    index = _device_index(device)\n"
        "    if index < 0:\n"
        "        raise RuntimeError('device id must be positive!')\n"
        "    if index >= device_count():\n"
        "        raise RuntimeError('NPU function error: aclrtSetDevice(device), error code is 107001\\n'\n"
        "                           'rtSetDevice:ErrCode=107001, desc=[device id error], '\n"
        "                           'InnerCode=0x7010003 (invalid device=' + str(index) + ')')\n"
        "    _current[0] = index\n"
        "    from torch_npu import _emulated\n"
        "    _emulated.bring_up()  # the npu device, on the CPU (sim/packages/wheels.py EMULATED_NPU)\n"
        "\n"
        "\n"
        "def current_device():\n"
        "    return _current[0]\n"
        "\n"
        "\n"
        "def get_device_name(device=None):\n"
        "    # The SoC name the runtime reports, 'Ascend' and the chip npu-smi names (an Ascend910B3 node:\n"
        "    # LlamaFactory#6671's environment report, 'NPU type: Ascend910B3'), read from the simulated\n"
        "    # driver's state; an id the runtime does not see fails as set_device does.\n"
        "    import json\n"
        "    index = _current[0] if device is None else _device_index(device)\n"
        "    seen = _devices()\n"
        "    if index < 0 or index >= len(seen):\n"
        "        raise RuntimeError('NPU function error: aclrtGetSocName, error code is 107001 (invalid '\n"
        "                           'device=' + str(index) + ')')\n"
        "    with open(os.environ.get('ASCEND_SIM_ROOT', '/var/lib/ascend-sim') + '/state.json') as f:\n"
        "        chips = [c for n in json.load(f)['npus'] for c in n['chips']]\n"
        "    named = [c['name'] for c in chips if c.get('logic_id') == seen[index]] or [chips[0]['name']]\n"
        "    return 'Ascend' + named[0]\n"
        "\n"
        "\n"
        "# The device-state calls libraries make wherever torch_npu is importable, even for a job that runs\n"
        "# on CPU (transformers' set_seed, accelerate's clear_device_cache, the Trainer's RNG checkpoint):\n"
        "# no NPU state is kept here, so each leaves nothing to set or read.\n"
        "def manual_seed(seed):\n"
        "    pass\n"
        "\n"
        "\n"
        "manual_seed_all = seed = seed_all = manual_seed\n"
        "\n"
        "\n"
        "def empty_cache():\n"
        "    pass\n"
        "\n"
        "\n"
        "def synchronize(device=None):\n"
        "    pass  # torch_npu's takes the device to wait for, as torch.cuda.synchronize does\n"
        "\n"
        "\n"
        "def get_rng_state_all():\n"
        "    return []\n"
        "\n"
        "\n"
        "def set_rng_state_all(states):\n"
        "    pass\n"
        "\n"
        "\n"
        "def get_rng_state(device='npu'):\n"
        "    import torch\n"
        "    return torch.ByteTensor()  # the Trainer saves it with torch.save\n"
        "\n"
        "\n"
        "def set_rng_state(state, device='npu'):\n"
        "    pass\n"
        "\n"
        "\n"
        "class random:  # torch.npu.random.get_rng_state(), as the real module offers it\n"
        "    get_rng_state_all = staticmethod(get_rng_state_all)\n"
        "    set_rng_state_all = staticmethod(set_rng_state_all)\n"
        "    get_rng_state = staticmethod(get_rng_state)\n"
        "    set_rng_state = staticmethod(set_rng_state)\n"
        "    manual_seed_all = staticmethod(manual_seed)\n"
    )
    utils = "from torch_npu import _C  # noqa: F401\n\n\ndef _should_print_warning():\n    return False\n"
    c_ext = (
        "import os\n"
        "\n"
        "\n"
        "def _find(lib):\n"
        "    root = os.environ.get('ASCEND_SIM_FSROOT', '')\n"
        "    for d in os.environ.get('LD_LIBRARY_PATH', '').split(':'):\n"
        "        if d and os.path.isfile(root + os.path.join(d, lib)):\n"
        "            return True\n"
        "    return False\n"
        "\n"
        "\n"
        "for _lib in ('libhccl.so', 'libascendcl.so'):\n"
        "    if not _find(_lib):\n"
        "        raise ImportError(_lib + ': cannot open shared object file: No such file or directory')\n"
    )
    return {
        "torch_npu/__init__.py": init,
        "torch_npu/_emulated.py": EMULATED_NPU,
        "torch_npu/npu/__init__.py": npu,
        "torch_npu/utils/__init__.py": utils,
        "torch_npu/_C.py": c_ext,
        "torch_npu/version.py": f"__version__ = {version!r}\n",
    }
