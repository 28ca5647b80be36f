"""The grader's reading of a submission's source (judge/scan/): each escape hatch from the rules a worker
enforces with torch's modes is found, whatever way it is written, with its capability and line; the kit's own correct
code (reference solutions, stubs, every correct style of tests/impls/) gives no finding; a finding the contract refuses
fails the `capabilities` check of that problem alone; a file that cannot be read or parsed never crashes the grader."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import SOLUTIONS, make_impl
from attnkit import ROOT
from attnkit.grading import grade
from attnkit.judge.scan import (Capability as C, ESCAPES, enforced, lazy_imports, refused, scan_source,
                                scan_submission)
from attnkit.problems import all_problems, get
from attnkit.report.summary import to_json

IMPLS = Path(__file__).parent / "impls"


def found(source: str, banned=()) -> set[tuple[C, int]]:
    return {(f.capability, f.line) for f in scan_source(source, "x.py", banned)}


# (source, capability, line it must be found on): each hatch in several styles
HATCHES = {
    # torch's function and dispatch modes switched off
    "modes direct": ("import torch\nwith torch._C.DisableTorchFunction():\n    pass\n", C.MODES_OFF, 2),
    "modes module alias": ("import torch._C as C\nC._DisableTorchFunction()\n", C.MODES_OFF, 2),
    "modes from-import alias": ("from torch.utils._python_dispatch import _disable_current_modes as d\n"
                                "with d():\n    pass\n", C.MODES_OFF, 2),
    "modes from-import line": ("from torch._C import _DisableTorchDispatch\n", C.MODES_OFF, 1),
    "modes getattr literal": ("import torch\nx = getattr(torch._C, 'DisableTorchFunctionSubclass')\n", C.MODES_OFF, 2),
    "modes getattr chain": ("import torch\ngetattr(getattr(torch, '_C'), '_DisableTorchDispatch')()\n", C.MODES_OFF, 2),
    "modes getattr concatenated": ("import torch\ngetattr(torch._C, 'Disable' + 'TorchFunction')()\n", C.MODES_OFF, 2),
    "modes __import__": ("m = __import__('torch._C', fromlist=['x'])\n\n\nm.DisableTorchFunction()\n", C.MODES_OFF, 4),
    "modes importlib": ("import importlib\nC = importlib.import_module('torch._C')\nwith C.DisableTorchFunction():\n"
                        "    pass\n", C.MODES_OFF, 3),
    "modes assigned alias": ("import torch\nC = torch._C\nD = C.DisableTorchFunction\n", C.MODES_OFF, 3),
    "modes sys.modules": ("import sys\nsys.modules['torch._C'].DisableTorchFunction()\n", C.MODES_OFF, 2),
    "modes vars": ("import torch\nvars(torch)['_C'].DisableTorchFunction()\n", C.MODES_OFF, 2),
    "modes pop a mode": ("from torch.overrides import _pop_mode_temporarily\n", C.MODES_OFF, 1),
    "modes disabled impl": ("import torch\nclass T(torch.Tensor):\n    __torch_function__ = "
                            "torch._C._disabled_torch_function_impl\n", C.MODES_OFF, 3),
    "modes in a function": ("def f():\n    import torch\n    with torch._C.DisableTorchFunction():\n        pass\n",
                            C.MODES_OFF, 3),
    # a mode of its own
    "own mode subclass": ("from torch.overrides import TorchFunctionMode\n\nclass M(TorchFunctionMode):\n    pass\n",
                          C.OWN_MODES, 3),
    "own __torch_dispatch__": ("class T:\n    @classmethod\n    def __torch_dispatch__(cls, f, t, a=(), k=None):\n"
                               "        pass\n", C.OWN_MODES, 3),
    # the autograd engine
    "engine saved": ("import torch\nold = torch.autograd.variable.Variable._execution_engine\n", C.AUTOGRAD_ENGINE, 2),
    "engine from-import": ("from torch.autograd.variable import Variable as V\nV._execution_engine = None\n",
                           C.AUTOGRAD_ENGINE, 2),
    "engine built": ("import torch\ne = torch._C._ImperativeEngine()\n", C.AUTOGRAD_ENGINE, 2),
    "engine getattr": ("import torch\ngetattr(torch.autograd.Variable, '_execution_engine')\n", C.AUTOGRAD_ENGINE, 2),
    "engine any receiver": ("def f(v):\n    return v._execution_engine\n", C.AUTOGRAD_ENGINE, 2),
    # automatic differentiation (refused where gradients are computed by hand)
    "autograd grad alias": ("from torch.autograd import grad as g\n\ng(y, x)\n", C.AUTOGRAD, 3),
    "autograd functional": ("import torch.autograd.functional as AF\n", C.AUTOGRAD, 1),
    "autograd func": ("import torch.func as tf\nx = 1\ntf.vjp(f, x)\n", C.AUTOGRAD, 3),
    "autograd forward_ad": ("import torch.autograd.forward_ad as fwAD\n", C.AUTOGRAD, 1),
    "autograd backward()": ("def f(loss):\n    loss.sum().backward()\n", C.AUTOGRAD, 2),
    # the kernel's memory counters
    "clear_refs literal": ("open('/proc/self/clear_refs', 'w').write('5')\n", C.CLEAR_REFS, 1),
    "clear_refs f-string": ("pid = 1\nopen(f'/proc/{pid}/clear_refs', 'w')\n", C.CLEAR_REFS, 2),
    "clear_refs concatenated": ("p = '/proc/self/' + 'clear_' + 'refs'\n", C.CLEAR_REFS, 1),
    "clear_refs bytes": ("import os\nos.write(3, b'5')\npath = b'/proc/self/clear_refs'\n", C.CLEAR_REFS, 3),
    "proc file": ("open('/proc/self/status').read()\n", C.PROC_FILES, 1),
    # native code
    "ctypes import": ("import ctypes\n", C.NATIVE_CODE, 1),
    "ctypes alias": ("import ctypes as c\n\nc.CDLL(None)\n", C.NATIVE_CODE, 3),
    "ctypes from-import": ("from ctypes import CDLL\n", C.NATIVE_CODE, 1),
    "ctypes __import__": ("x = 1\nm = __import__('ctypes')\n", C.NATIVE_CODE, 2),
    "ctypes importlib": ("import importlib\nimportlib.import_module('ctypes').CDLL(None)\n", C.NATIVE_CODE, 2),
    "ctypes of an array": ("import numpy as np\np = np.zeros(3).ctypes.data\n", C.NATIVE_CODE, 2),
    "cpp extension": ("from torch.utils.cpp_extension import load_inline\n", C.NATIVE_CODE, 1),
    # the garbage collector
    "gc direct": ("import gc\ngc.get_objects()\n", C.GC_WALK, 2),
    "gc from-import alias": ("from gc import get_referrers as r\nr(1)\n", C.GC_WALK, 2),
    "gc getattr": ("import gc as g\ngetattr(g, 'get_referents')(1)\n", C.GC_WALK, 2),
    "gc __import__": ("__import__('gc').get_objects()\n", C.GC_WALK, 1),
    # stack frames
    "frames sys": ("import sys\nf = sys._getframe(1)\n", C.FRAME_WALK, 2),
    "frames inspect": ("import inspect\ng = inspect.currentframe().f_back.f_globals\n", C.FRAME_WALK, 2),
    "frames from-import": ("from sys import _getframe as gf\n", C.FRAME_WALK, 1),
    "frames stack": ("import inspect\ninspect.stack()\n", C.FRAME_WALK, 2),
    "frames settrace": ("import sys\nsys.settrace(None)\n", C.FRAME_WALK, 2),
    "frames traceback": ("def f(e):\n    return e.__traceback__.tb_frame\n", C.FRAME_WALK, 2),
    # Python's internals
    "subclasses": ("x = ().__class__.__bases__[0].__subclasses__()\n", C.INTROSPECTION, 1),
    "builtins": ("e = __builtins__['eval']\n", C.INTROSPECTION, 1),
    "globals of a function": ("def f(g):\n    return g.__globals__\n", C.INTROSPECTION, 2),
    # private torch bindings and internals
    "private attribute": ("import torch\ntorch._C._nn.softmax\n", C.PRIVATE_TORCH, 2),
    "private getattr": ("import torch\nx = getattr(torch, '_C')\n", C.PRIVATE_TORCH, 2),
    "private higher-order ops": ("from torch._higher_order_ops import out_dtype\n", C.PRIVATE_TORCH, 1),
    "private dynamo": ("import torch._dynamo\n", C.PRIVATE_TORCH, 1),
    "private via __import__": ("t = __import__('torch')\nt._C\n", C.PRIVATE_TORCH, 2),
    "private in a string": ("import operator\noperator.attrgetter('_C')\nname = 'torch._C'\n", C.PRIVATE_TORCH, 3),
    # the dispatcher
    "library": ("import torch\nlib = torch.library.Library('aten', 'IMPL')\n", C.DISPATCHER, 2),
    "library from-import": ("from torch.library import impl\n", C.DISPATCHER, 1),
    "dispatch binding": ("import torch\ntorch._C._dispatch_has_kernel_for_dispatch_key('x', 'y')\n", C.DISPATCHER, 2),
    # flex_attention
    "flex from-import": ("from torch.nn.attention.flex_attention import flex_attention\n", C.FLEX_ATTENTION, 1),
    "flex module alias": ("import torch.nn.attention.flex_attention as fa\n\nfa.flex_attention(1, 2, 3)\n",
                          C.FLEX_ATTENTION, 3),
    # dynamic code
    "eval": ("x = eval('1')\n", C.DYNAMIC_CODE, 1),
    "exec": ("def f(src):\n    exec(src)\n", C.DYNAMIC_CODE, 2),
    "compile": ("code = compile('x', 'f', 'exec')\n", C.DYNAMIC_CODE, 1),
    "getattr computed": ("import torch\nname = '_' + chr(67)\ngetattr(torch, name)\n", C.DYNAMIC_CODE, 3),
    "getattr computed on alias": ("import torch.nn.functional as F\ndef f(n):\n    return getattr(F, n)\n",
                                  C.DYNAMIC_CODE, 3),
    "__import__ computed": ("def f(n):\n    return __import__(n)\n", C.DYNAMIC_CODE, 2),
    "importlib computed": ("import importlib\ndef f(n):\n    return importlib.import_module(n)\n", C.DYNAMIC_CODE, 3),
    "getattr as a value": ("import functools, torch\nfunctools.reduce(getattr, ['_C'], torch)\n", C.DYNAMIC_CODE, 2),
    "module __dict__": ("import torch\ndef f(k):\n    return torch.__dict__[k]\n", C.DYNAMIC_CODE, 3),
    "globals()": ("def f(k):\n    return globals()[k]\n", C.DYNAMIC_CODE, 2),
    "pickle": ("import pickle\n", C.DYNAMIC_CODE, 1),
    "builtins module": ("import builtins\nbuiltins.eval('1')\n", C.DYNAMIC_CODE, 2),
    # the import machinery
    "meta_path": ("import sys\nsys.meta_path.insert(0, object())\n", C.IMPORT_HOOKS, 2),
    "importlib.util": ("import importlib.util\n", C.IMPORT_HOOKS, 1),
    "sys.modules written": ("import sys\nsys.modules['x'] = object()\n", C.IMPORT_HOOKS, 2),
    # the grader itself
    "grader modules": ("import attnkit.run.harness\n", C.GRADER_INTERNALS, 1),
    "grader from-import": ("from attnkit import grading\n", C.GRADER_INTERNALS, 1),
    # patching modules
    "patch assignment": ("import torch\ntorch.softmax = print\n", C.PATCHES_MODULES, 2),
    "patch setattr": ("import torch\nsetattr(torch.nn.functional, 'softmax', print)\n", C.PATCHES_MODULES, 2),
    "patch a torch class": ("from torch import Tensor\nTensor.__matmul__ = print\n", C.PATCHES_MODULES, 2),
    # processes and threads
    "os.system": ("import os\nos.system('true')\n", C.PROCESSES, 2),
    "subprocess": ("import subprocess\n", C.PROCESSES, 1),
    "multiprocessing": ("from multiprocessing import Process\n", C.PROCESSES, 1),
    "signal": ("import signal\nsignal.signal(signal.SIGALRM, print)\n", C.PROCESSES, 2),
    "fork by alias": ("import os as o\npid = o.fork()\n", C.PROCESSES, 2),
    "thread": ("import threading\nthreading.Thread(target=print).start()\n", C.THREADS, 2),
    "thread pool": ("from concurrent.futures import ThreadPoolExecutor\n", C.THREADS, 1),
    "_thread": ("import _thread\n", C.THREADS, 1),
    # NumPy
    "from_numpy": ("import torch\nx = torch.from_numpy(a)\n", C.NUMPY_BRIDGE, 2),
    "from_numpy from-import": ("from torch import from_numpy\n", C.NUMPY_BRIDGE, 1),
    # where and how it runs: code that behaves one way when graded and another in the learner's hands
    "own path": ("import torch\nGRADED = '/tmp/' in __file__\n", C.RUN_CONTEXT, 2),
    "environment": ("import os\nquiet = os.environ.get('ATTNKIT_SANDBOX')\n", C.RUN_CONTEXT, 2),
    "environment from-import": ("from os import getenv\n", C.RUN_CONTEXT, 1),
    "files around it": ("from pathlib import Path\nx = Path('/tmp').exists()\n", C.RUN_CONTEXT, 1),
    "spec origin": ("o = __spec__.origin\n", C.RUN_CONTEXT, 1),
    "working directory": ("import os.path as p\nhere = p.abspath('.')\n", C.RUN_CONTEXT, 2),
    # literal code given to exec: read as code, at the call's line
    "exec literal": ("x = 1\nexec('import ctypes')\n", C.NATIVE_CODE, 2),
    # Triton's machinery, where the interpreter counts the kernels (the kernels stage)
    "triton interpreter": ("import triton.runtime.interpreter as it\nit.interpreter_builder = None\n", C.KERNEL_RUNTIME, 1),
    "triton knobs": ("import triton\ntriton.knobs.runtime.interpret = False\n", C.KERNEL_RUNTIME, 2),
    "triton autotune": ("import triton\n@triton.autotune(configs=[], key=[])\ndef k():\n    pass\n", C.KERNEL_RUNTIME, 2),
    "triton compiler from-import": ("from triton.compiler import compile\n", C.KERNEL_RUNTIME, 1),
    "triton inline asm": ("import triton.language as tl\nf = tl.inline_asm_elementwise\n", C.KERNEL_RUNTIME, 2),
    "triton private": ("import triton._C.libtriton as lib\n", C.KERNEL_RUNTIME, 1),
    "triton builder by attribute": ("def f(b):\n    return b.interpreter_builder\n", C.KERNEL_RUNTIME, 2),
    "inspect": ("import inspect\n", C.INTROSPECTION, 1),
    # a public part of torch that imports a private one on its first call: never refused, imported by the grader
    "checkpoint aliased": ("from torch.utils import checkpoint as ck\ny = ck.checkpoint(f, x)\n", C.LAZY_TORCH, 2),
}


@pytest.mark.parametrize("name", sorted(HATCHES))
def test_each_hatch_is_found_with_its_capability_and_line(name):
    source, capability, line = HATCHES[name]
    assert (capability, line) in found(source), found(source)


def test_every_capability_has_a_hatch_test():
    covered = {cap for _, cap, _ in HATCHES.values()} | {C.BANNED_CALL, C.UNREADABLE}
    assert covered == set(C)


@pytest.mark.parametrize("source,banned,line", [
    ("import torch.nn.functional as F\nF.scaled_dot_product_attention(1, 2, 3)\n", ("scaled_dot_product_attention",), 2),
    ("from torch import nn\nm = nn.MultiheadAttention(4, 2)\n", ("multi_head_attention_forward",), 2),
    ("import torch\nop = torch.ops.aten._scaled_dot_product_flash_attention.default\n", ("_scaled_dot_product*",), 2),
    ("import torch\nf = getattr(torch.nn.functional, 'scaled_dot_product_attention')\n",
     ("scaled_dot_product_attention",), 2),
])
def test_a_function_the_spec_bans_is_found(source, banned, line):
    assert (C.BANNED_CALL, line) in found(source, banned)
    assert not any(cap is C.BANNED_CALL for cap, _ in found(source))  # only where a spec bans it


@pytest.mark.parametrize("source", [
    "import re\nre.compile('x')\n",
    "from re import compile\ncompile('x')\n",
    "import torch\nf = torch.compile(print)\n",
    "class Model:\n    def compile(self):\n        pass\n\nModel().compile()\n",
    "def f(self, name):\n    return getattr(self, f'{name}_score')\n",
    "import torch\nx = torch.finfo(torch.float64).min + torch.iinfo(torch.int64).max\n",
    "import torch\ntorch.backends.cuda.matmul.allow_tf32 = False\n",
    "import torch\nfrom torch import nn\nfan_in, _ = nn.init._calculate_fan_in_and_fan_out(torch.ones(2, 2))\n",
    "class Softmax:\n    def backward(self, g):\n        return g\n\nSoftmax().backward(1)\n",
    '"""Never call torch._C.DisableTorchFunction, ctypes or gc.get_objects: the grader fails it."""\n',
    "import torch\nif __name__ == '__main__':\n    import ctypes\n    torch._C.DisableTorchFunction()\n",
    "import sys\nimport os\nprint(sys.maxsize, sys.float_info.epsilon, os.sep, os.path.join('a'))\n",
    "import threading\nlock = threading.Lock()\n",
    "import torch\nfrom torch.nn.attention import SDPBackend, sdpa_kernel\n",
    "import torch\nwith torch.no_grad(), torch.enable_grad():\n    pass\n",
    "import torch\nclass F(torch.autograd.Function):\n    @staticmethod\n    def backward(ctx, g):\n        return g\n",
    "from dataclasses import dataclass\nimport functools, math, logging, typing\nlog = logging.getLogger(__name__)\n",
])
def test_ordinary_code_gives_no_finding(source):
    assert scan_source(source, "x.py") == []


REAL_WORLD = {
    # nanoGPT's CausalSelfAttention (its flash path asks whether torch has F.scaled_dot_product_attention)
    "nanogpt": '''
import math
import torch
import torch.nn as nn
from torch.nn import functional as F

class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.n_head, self.n_embd = config.n_head, config.n_embd
        self.flash = hasattr(torch.nn.functional, 'scaled_dot_product_attention')
        if not self.flash:
            self.register_buffer("bias", torch.tril(torch.ones(config.block_size, config.block_size))
                                 .view(1, 1, config.block_size, config.block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float('-inf'))
        att = self.attn_dropout(F.softmax(att, dim=-1))
        return self.c_proj((att @ v).transpose(1, 2).contiguous().view(B, T, C))
''',
    # Hugging Face's eager attention, with its activation table and typing
    "hf": '''
from typing import Callable, Optional, Tuple
import torch
from torch import nn
import torch.nn.functional as F

ACT2FN = {"gelu": F.gelu, "relu": F.relu}

def repeat_kv(hidden_states: torch.Tensor, n_rep: int) -> torch.Tensor:
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)

def eager_attention_forward(module: nn.Module, query, key, value, attention_mask: Optional[torch.Tensor],
                            scaling: float, dropout: float = 0.0, **kwargs) -> Tuple[torch.Tensor, torch.Tensor]:
    key_states = repeat_kv(key, module.num_key_value_groups)
    value_states = repeat_kv(value, module.num_key_value_groups)
    attn_weights = torch.matmul(query, key_states.transpose(2, 3)) * scaling
    if attention_mask is not None:
        attn_weights = attn_weights + attention_mask[:, :, :, : key_states.shape[-2]]
    attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query.dtype)
    attn_weights = nn.functional.dropout(attn_weights, p=dropout, training=module.training)
    attn_output = torch.matmul(attn_weights, value_states).transpose(1, 2).contiguous()
    return attn_output, attn_weights

class Attention(nn.Module):
    def __init__(self, config, layer_idx: int):
        super().__init__()
        self.config = config
        self.head_dim = getattr(config, "head_dim", config.hidden_size // config.num_attention_heads)
        self.act = ACT2FN[getattr(config, "hidden_act", "gelu")]
        self._attn: Callable = eager_attention_forward

    def forward(self, hidden_states, **kwargs):
        return self._attn(self, hidden_states, hidden_states, hidden_states, None, self.head_dim ** -0.5)
''',
    # a hand-written backward in the style of course notes: layers with forward and backward methods
    "layers": '''
import numpy as np
import torch

class Softmax:
    def forward(self, s):
        self.p = torch.softmax(s, dim=-1)
        return self.p

    def backward(self, dp):
        return self.p * (dp - (dp * self.p).sum(-1, keepdim=True))

def attention_backward(q, k, v, do, is_causal=False):
    sm = Softmax()
    p = sm.forward(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5)
    ds = sm.backward(do @ v.transpose(-2, -1))
    return ds @ k, ds.transpose(-2, -1) @ q, p.transpose(-2, -1) @ do
''',
}


@pytest.mark.parametrize("name", sorted(REAL_WORLD))
def test_real_world_style_code_has_nothing_refused(name):
    """nanoGPT's hasattr(F, 'scaled_dot_product_attention') is a banned name in the problems that ban it (listed
    there, refused there as a reference to a banned function); nothing else is found."""
    for problem in all_problems():
        findings = scan_source(REAL_WORLD[name], "x.py", problem.banned)
        assert all(f.capability is C.BANNED_CALL for f in findings), [f.describe() for f in findings]
    assert scan_source(REAL_WORLD[name], "x.py") == []


def _kit_sources():
    dirs = [ROOT / "solutions", ROOT / "exercises", *sorted(d for d in IMPLS.iterdir() if d.is_dir())]
    return [(d, f.stem) for d in dirs for f in sorted(d.glob("*.py"))]


@pytest.mark.parametrize("folder,module", _kit_sources(), ids=lambda x: x.name if isinstance(x, Path) else x)
def test_the_kits_correct_code_gives_no_finding(folder, module):
    """Reference solutions, stubs and every correct style: not one finding, let alone a refused one."""
    problem = next((p for p in all_problems() if p.id == module), None)
    assert scan_submission(folder, module, problem.banned if problem else ()) == []


def test_the_check_is_where_the_worker_enforces_a_contract():
    """capabilities has points exactly in the specs with banned calls, a memory bound or gradients by hand."""
    for p in all_problems():
        assert ("capabilities" in p.points) == bool(enforced(p)), p.id
    assert {p.id for p in all_problems() if "capabilities" in p.points} == {
        "scaled_dot_product_attention", "multihead_attention", "flash_attention", "attention_backward",
        "grouped_query_attention", "causal_self_attention", "chunked_additive_attention", "cross_attention",
        "sliding_window_attention", "paged_attention", "latent_attention", "alibi_attention", "linear_attention",
        "triton_flash_attention", "triton_flash_attention_backward"}


def test_what_each_contract_refuses():
    finding = {cap: scan_source(HATCHES[name][0], "x.py")[0] for name, cap in [
        ("modes direct", C.MODES_OFF), ("autograd grad alias", C.AUTOGRAD), ("from_numpy", C.NUMPY_BRIDGE),
        ("flex from-import", C.FLEX_ATTENTION)]}
    assert all(f.capability is cap for cap, f in finding.items())
    flash, backward, sdpa, softmax = (get(p) for p in ("flash_attention", "attention_backward",
                                                       "scaled_dot_product_attention", "masked_softmax"))
    assert refused(flash, finding[C.MODES_OFF]) and refused(sdpa, finding[C.MODES_OFF])
    assert not refused(softmax, finding[C.MODES_OFF])  # no contract enforced in the worker: listed only
    assert refused(backward, finding[C.AUTOGRAD]) and not refused(flash, finding[C.AUTOGRAD])
    assert refused(flash, finding[C.NUMPY_BRIDGE]) and not refused(sdpa, finding[C.NUMPY_BRIDGE])  # memory bound
    assert refused(flash, finding[C.FLEX_ATTENTION]) and not refused(sdpa, finding[C.FLEX_ATTENTION])  # banned by name
    assert ESCAPES == set(C) - {C.AUTOGRAD, C.FLEX_ATTENTION, C.BANNED_CALL, C.NUMPY_BRIDGE, C.LAZY_TORCH}
    lazy = scan_source(HATCHES["checkpoint aliased"][0], "x.py")
    assert not any(refused(p, f) for p in (flash, backward, sdpa, softmax) for f in lazy)
    assert lazy_imports(lazy) == ["torch._dynamo"] and lazy_imports(found := scan_source("import torch\n")) == [] == found


def test_words_are_the_graders_own():
    """Names of the learner's own making (an identifier, a string) never appear in a finding, only the kit's."""
    source = ("import torch\nx = torch._C._Evil_Name_Here()\ny = getattr(torch, 'x' + 'Evil<b>Text')\n"
              "import torch._dynamo.EvilModule\nexec('import ctypes  # EvilComment')\n")
    findings = scan_source(source, "x.py")
    assert findings and not any("Evil" in f.what for f in findings), [f.what for f in findings]


def test_sibling_modules_are_read_too(tmp_path):
    """A hatch moved into a helper module the problem imports (relatively, under the worker's package name, or
    absolutely: the worker puts the submission's folder on sys.path) is found there, with that file's name."""
    impl = make_impl(tmp_path, {
        "flash_attention.py": (SOLUTIONS / "flash_attention.py").read_text().replace(
            "import torch\n", "import torch\nfrom . import helper\nimport importlib\nimportlib.import_module('.deep', "
                              "__package__)\n", 1),
        "helper.py": "import ctypes\nfrom attnkit_submission.sub.inner import f\nfrom plain import g\n",
        "plain.py": "import os\n\n\nos.system('true')\n",
        "deep.py": "import gc\ngc.get_objects()\n",
        "sub/__init__.py": "import sys\nsys.settrace(None)\n",
        "sub/inner.py": "import threading\nf = threading.Thread\n",
        "unused.py": "import ctypes\n",
    })
    findings = {(f.capability, f.file, f.line) for f in scan_submission(impl, "flash_attention")}
    assert findings == {(C.NATIVE_CODE, "helper.py", 1), (C.GC_WALK, "deep.py", 2), (C.FRAME_WALK, "sub/__init__.py", 2),
                        (C.THREADS, "sub/inner.py", 2), (C.PROCESSES, "plain.py", 4)}, findings


@pytest.mark.parametrize("content", [
    b"def broken(:\n",
    b"x = 1\n\x00\x00\n",
    b"\xff\xfe\x00garbage",
    b"# -*- coding: no-such-codec -*-\nx = 1\n",
    b"x = " + b"(" * 5000 + b")" * 5000 + b"\n",
    b"x = " + b"-" * 200000 + b"1\n",
    b"x = '\\d'\n" + b"[" * 90 + b"]" * 90 + b"\n",
])
def test_a_file_that_does_not_parse_never_crashes_the_scan(tmp_path, content):
    (tmp_path / "flash_attention.py").write_bytes(content)
    findings = scan_submission(tmp_path, "flash_attention")
    assert all(f.capability is C.UNREADABLE for f in findings)


def test_a_syntax_error_is_reported_with_its_line(tmp_path):
    (tmp_path / "flash_attention.py").write_text("import torch\n\ndef flash_attention(:\n")
    (f,) = scan_submission(tmp_path, "flash_attention")
    assert (f.capability, f.file, f.line) == (C.UNREADABLE, "flash_attention.py", 3) and "does not parse" in f.what


def test_files_the_grader_must_not_read_are_refused_without_reading(tmp_path):
    """A FIFO (reading it would block), a link out of the submission, a file too large: each one finding, at once."""
    outside = tmp_path / "outside.py"
    outside.write_text("x = 1\n")
    impl = tmp_path / "impl"
    impl.mkdir()
    os.mkfifo(impl / "flash_attention.py")
    (impl / "grouped_query_attention.py").symlink_to(outside)
    (impl / "attention_backward.py").write_text("x = 1\n" * 300000)
    for module, why in [("flash_attention", "not a regular file"), ("grouped_query_attention", "outside the submission"),
                        ("attention_backward", "larger than")]:
        (f,) = scan_submission(impl, module)
        assert f.capability is C.UNREADABLE and why in f.what, f.what
    assert scan_submission(impl, "missing") == []  # not started: nothing to read


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """flash_attention switching off the torch function modes, graded with two untouched problems."""
    source = (SOLUTIONS / "flash_attention.py").read_text()
    source = source.replace("def flash_attention(", "def _inner(") + (
        "\n\ndef flash_attention(*args, **kwargs):\n    with torch._C.DisableTorchFunction():\n"
        "        return _inner(*args, **kwargs)\n")
    line = source.splitlines().index("    with torch._C.DisableTorchFunction():") + 1
    impl = make_impl(tmp_path_factory.mktemp("modes_off"), {"flash_attention.py": source})
    return grade(impl, ["masked_softmax", "scaled_dot_product_attention", "flash_attention"]), line


def test_a_refused_hatch_fails_the_capabilities_check_only(graded):
    report, line = graded
    flash = report.problem("flash_attention")
    failing = [c for c in flash.checks if c.status == "failed"]
    assert [c.id for c in failing] == ["capabilities"], [(c.id, c.message[:200]) for c in failing]
    message = failing[0].message
    assert f"flash_attention.py line {line}" in message and "torch modes" in message and failing[0].mistake is None
    assert flash.score == flash.max_score - 1
    assert [(u.capability, u.file, u.line, u.refused) for u in flash.uses] == [("modes_off", "flash_attention.py", line,
                                                                                 True)]


def test_the_other_problems_are_unaffected(graded):
    report, _ = graded
    for pid in ("masked_softmax", "scaled_dot_product_attention"):
        p = report.problem(pid)
        assert p.status == "passed" and p.score == p.max_score and p.uses == []


def test_the_json_report_lists_the_uses_and_keeps_its_schema(graded):
    import jsonschema

    report, line = graded
    data = to_json(report)
    schema = json.loads((ROOT / "grader" / "report.schema.json").read_text())
    jsonschema.validate(data, schema)
    flash = next(p for p in data["problems"] if p["id"] == "flash_attention")
    assert flash["uses"] == [{"capability": "modes_off", "file": "flash_attention.py", "line": line,
                              "what": flash["uses"][0]["what"], "refused": True}]
    item = schema["properties"]["problems"]["items"]["properties"]["uses"]["items"]
    assert item["properties"]["capability"]["enum"] == [c.value for c in C]


def test_the_reports_show_the_uses(graded):
    from attnkit.report.interview import markdown
    from attnkit.report.summary import table

    report, line = graded
    assert f"USES  (flash_attention.py line {line}): switches off" in table(report)
    assert f"- `flash_attention.py` line {line}: switches off" in markdown(report, "<s>", ["grade"])


def test_listed_only_where_no_contract_applies(tmp_path):
    """masked_softmax enforces nothing in the worker: a hatch there is listed for the interviewer, never failed."""
    source = "import gc\n" + (SOLUTIONS / "masked_softmax.py").read_text()
    report = grade(make_impl(tmp_path, {"masked_softmax.py": source}), ["masked_softmax"])
    p = report.problems[0]
    assert p.status == "passed" and [(u.capability, u.line, u.refused) for u in p.uses] == []
    source = "import gc\n_ = gc.get_referrers\n" + (SOLUTIONS / "masked_softmax.py").read_text()
    report = grade(make_impl(tmp_path / "2", {"masked_softmax.py": source}), ["masked_softmax"])
    p = report.problems[0]
    assert p.status == "passed" and [(u.capability, u.line, u.refused) for u in p.uses] == [("gc_walk", 2, False)]


def test_a_syntax_error_is_graded_as_not_started(tmp_path):
    report = grade(make_impl(tmp_path, {"flash_attention.py": "import torch\n\ndef flash_attention(:\n"}),
                   ["flash_attention"])
    p = report.problems[0]
    assert p.status == "not_started" and report.grader_errors == 0
    assert [(u.capability, u.line) for u in p.uses] == [("unreadable", 3)]


def test_a_failure_of_the_reading_is_the_graders_error(tmp_path, monkeypatch):
    """A failure of the reading is reported as the grader's (its message says so), but the source it read is the
    learner's: like any check that cannot be judged once learner code is in play, it fails and keeps its points in the
    maximum (docs/security.md, Grader errors), so no source can shrink its own maximum by crashing the reader."""
    import attnkit.grading as grading

    def broken(impl, problem):
        raise RuntimeError("scanner bug")

    monkeypatch.setattr(grading, "scan_problem", broken)
    report = grade(make_impl(tmp_path), ["scaled_dot_product_attention"])
    p = report.problems[0]
    check = next(c for c in p.checks if c.id == "capabilities")
    assert check.status == "failed" and "scanner bug" in check.message and check.max_score > 0
    assert "could not judge" in check.message
    assert all(c.status in ("passed", "skipped") for c in p.checks if c.id != "capabilities")
    assert p.uses == [] and p.score == p.max_score - check.max_score


def test_file_names_in_findings_are_shown_escaped():
    """A file name reaches the terminal and the interviewer's report: no control character or escape sequence of it
    survives, and the report fences it as code."""
    from attnkit.judge.scan.files import _shown
    from attnkit.report.interview import code

    shown = _shown("a\x1b[31mb\n\u202e`x`.py")
    assert shown.isascii() and shown.isprintable() and "\x1b" not in shown and "\n" not in shown
    assert code(shown).startswith("``") and "`x`" in code(shown)
