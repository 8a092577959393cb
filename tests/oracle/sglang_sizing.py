"""SGLang's own start-up sizing, run on a CPU host: the oracle for the planner's SGLang figures.

Runs inside an SGLang release's own virtualenv (`make .venv-oracle-sglang-<release>/.installed`),
0.5.19 to 0.5.23 (the few calls spelled otherwise before 0.5.21 are switched on what the release
has: `runtime_context.SpawnRanks`, the configurator's `ps`):

    python sglang_sizing.py inputs.json outputs.json

`inputs.json` is a list of configurations: {id, config (a Hugging Face config.json), gpu_mib (the
GPU's nvidia-smi total), compute_capability, free_before_load_bytes, weights_bytes_per_rank, and
the SGLang flags: tensor_parallel_size, pipeline_parallel_size, kv_cache_dtype, dtype, page_size,
context_length, mem_fraction_static, max_running_requests, chunked_prefill_size,
swa_full_tokens_ratio, max_total_tokens}. Each one goes through SGLang's real path:

- `prepare_server_args(argv)` and `ServerArgs.resolve_once()` (arg_groups/: the GPU memory tiers,
  the automatic mem_fraction_static, the attention-backend and page-size overrides, the per-model
  overrides);
- `publish(...)` and `model_config_of(...)` for the ModelConfig (heads per rank, context length,
  hybrid layer ids);
- `KVCacheConfigurator._resolve_memory_pool_config(pre_model_load_memory)` (the KV budget, the
  pool configurators, the running-request resolution).

No GPU is present, so each stub below stands in for one fact about the GPU (its nvidia-smi total,
its compute capability, the free memory before and after the weights load); no model is built,
so three lines of the model files are restated: the TP head checks (through the model config),
the model's own `get_attention_sliding_window_size` (called on the config), and `max_req_len`
from `tp_worker`. The output is `{"meta": {...}, "results": [...]}`, one result per input.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import io
import json
import logging
import os
import sys
import tempfile
import traceback
import types
from pathlib import Path
from typing import Any

os.environ.setdefault("SGLANG_LOGGING_LEVEL", "ERROR")
# SGLang reads torch.cuda at import in a few places; none is present.
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")


class _AnyMeta(type):
    def __getattr__(cls, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _AnyMeta(attr, (), {})


def _inert_attr(attr: str) -> Any:
    if attr.startswith("__"):
        raise AttributeError(attr)
    return _AnyMeta(attr, (), {})


class _Inert(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Stub 1: torchvision. The PyPI wheel links libtorch_cuda; SGLang imports it only for
    multimodal preprocessing, which sizing never runs."""

    roots = ("torchvision",)

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name.split(".")[0] in self.roots:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec: Any) -> Any:
        m = types.ModuleType(spec.name)
        m.__path__ = []
        m.__getattr__ = _inert_attr  # type: ignore[method-assign]
        return m

    def exec_module(self, module: Any) -> None:
        return None


import transformers.utils.import_utils as _tiu  # noqa: E402

_tiu.is_torchvision_available()  # transformers caches "absent" before the stub goes in
import transformers.models.auto.image_processing_auto  # noqa: E402,F401

sys.meta_path.insert(0, _Inert())

import sglang  # noqa: E402
import sglang.srt.platforms as _platforms  # noqa: E402
import torch  # noqa: E402
from sglang.srt import runtime_context as rc  # noqa: E402
from sglang.srt.platforms.cuda import CudaSRTPlatform  # noqa: E402
from sglang.srt.utils import common as _common  # noqa: E402

# Stub 2: the platform singleton is CUDA's.
_platforms._current_platform = CudaSRTPlatform()

GIB = 1 << 30
_FACTS: dict[str, Any] = {}


def _gpu_mib(device: str | None = None) -> float:
    """Stub 4: the GPU's nvidia-smi total in MiB (SGLang's tiers read this figure)."""
    return float(_FACTS["gpu_mib"])


def _available_gib(*_a: Any, **_k: Any) -> float:
    """Stub 5: free GPU memory (GiB, as SGLang's helper returns it) at the moment asked:
    before the weights load, then after."""
    return float(_FACTS["free_gib"])


for _mod_name, _mod in list(sys.modules.items()):
    if _mod_name.startswith("sglang") and _mod is not None:
        if getattr(_mod, "get_device_memory_capacity", None) is _common.get_device_memory_capacity:
            _mod.get_device_memory_capacity = _gpu_mib  # type: ignore[attr-defined]
_common.get_device_memory_capacity = _gpu_mib
_common.get_available_gpu_memory = _available_gib

import sglang.srt.layers.quantization as _quant  # noqa: E402
from sglang.srt.arg_groups import memory_hook as _memory_hook  # noqa: E402
from sglang.srt.arg_groups.overrides import model_config_of, resolved_view  # noqa: E402
from sglang.srt.configs.model_config import AttentionArch  # noqa: E402
from sglang.srt.distributed.utils import get_pp_indices  # noqa: E402
from sglang.srt.layers.quantization.mxfp4 import Mxfp4Config  # noqa: E402
from sglang.srt.mem_cache import kv_cache_configurator as _kvc_mod  # noqa: E402
from sglang.srt.mem_cache.kv_cache_dtype import configure_kv_cache_dtype  # noqa: E402
from sglang.srt.model_executor import cuda_graph_config as _cuda_graph_config  # noqa: E402
from sglang.srt.model_executor.model_runner_components.layer_setup import (  # noqa: E402
    ModelLayerInfo,
)
from sglang.srt.model_executor.model_runner_components.spec_aux_hidden_state import (  # noqa: E402
    resolve_spec_aux_hidden_state_config,
)
from sglang.srt.server_args import prepare_server_args  # noqa: E402
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm  # noqa: E402

# Stub 3b: the prefill CUDA-graph backend's default asks torch (`utils.is_cuda()`), not the
# platform facts of stub 3; on CUDA it is "breakable" (model_executor/cuda_graph_config.py
# default_prefill_backend, 0.5.21–0.5.23), and the automatic fraction reserves for it.
if hasattr(_cuda_graph_config, "default_prefill_backend"):
    _cuda_graph_config.default_prefill_backend = lambda: _cuda_graph_config.Backend.BREAKABLE

# Stub 7: mxfp4 registers only when is_cuda() is true at import time (gpt-oss needs it).
for _table in ("BASE_QUANTIZATION_METHODS", "QUANTIZATION_METHODS"):
    getattr(_quant, _table).setdefault("mxfp4", Mxfp4Config)

# Stubs 4 and 5 where the modules bound the helpers by name.
for _m in (_memory_hook, _kvc_mod):
    if hasattr(_m, "get_device_memory_capacity"):
        _m.get_device_memory_capacity = _gpu_mib  # type: ignore[attr-defined]
    if hasattr(_m, "get_available_gpu_memory"):
        _m.get_available_gpu_memory = _available_gib  # type: ignore[attr-defined]

# Before 0.5.21: publish takes no spawn ranks, the groups are a scoped override (0.5.20's
# override_permanently holds derived widths only), and the configurator takes a ParallelState
# `ps` in place of attn_dp_size / pp_size (sglang-0.5.20 wheel, runtime_context.py and
# mem_cache/kv_cache_configurator.py).
_SPAWN_RANKS = hasattr(rc, "SpawnRanks")
_CONFIGURATOR_PS = "ps" in _kvc_mod.KVCacheConfigurator.__dataclass_fields__
_SCOPES: list[Any] = []


class _Group:
    """Stub 6: a process group of one (no torch.distributed)."""

    def __init__(self, world_size: int = 1) -> None:
        self.world_size = world_size
        self.rank_in_group = 0
        self.cpu_group = None
        self.device_group = None


def _world_group() -> _Group:
    """Stub 6c: parallel_state.get_world_group() as the pre-0.5.21 configurator asks it."""
    return _Group(int(_FACTS.get("world_size", 1)))


if hasattr(_kvc_mod, "get_world_group"):
    _kvc_mod.get_world_group = _world_group  # type: ignore[attr-defined]


def _pp_min_all_reduce(tensor: Any, op: Any = None, group: Any = None, **_k: Any) -> None:
    """Stub 6b: the PP ranks' MIN all-reduce of the token capacity, from a first pass over every
    rank (SGLang syncs the ranks' capacities this way)."""
    floor = _FACTS.get("pp_min_tokens")
    if floor is not None:
        tensor.fill_(min(int(tensor.item()), floor))


torch.distributed.all_reduce = _pp_min_all_reduce  # type: ignore[assignment]


def _platform_facts(cc: int) -> dict[str, Any]:
    """Stub 3: what SGLang asks the GPU, from its compute capability (e.g. 90 = SM90)."""
    major, minor = divmod(int(cc), 10)
    return {
        "is_cuda": True,
        "is_hip": False,
        "is_sm90": major == 9,
        "is_sm100": major == 10,
        "is_sm100_or_sm110": major in (10, 11),
        "is_sm110": major == 11,
        "is_sm120": major == 12,
        "is_blackwell": major >= 10,
        "is_hopper_with_cuda_12_3": major == 9,
        "has_flashinfer": True,
        "device_sm": major * 10 + minor,
        "device_capability": (major, minor),
    }


def _argv(case: dict[str, Any], model_dir: str) -> list[str]:
    argv = [
        "--model-path", model_dir, "--skip-tokenizer-init", "--load-format", "dummy",
        "--device", "cuda",
        "--tp-size", str(case.get("tensor_parallel_size", 1)),
        "--pp-size", str(case.get("pipeline_parallel_size", 1)),
        "--kv-cache-dtype", case.get("kv_cache_dtype", "auto"),
        "--dtype", case.get("dtype", "auto"),
    ]  # fmt: skip
    flags = {
        "page_size": "--page-size",
        "context_length": "--context-length",
        "mem_fraction_static": "--mem-fraction-static",
        "max_running_requests": "--max-running-requests",
        "chunked_prefill_size": "--chunked-prefill-size",
        "cuda_graph_max_bs": "--cuda-graph-max-bs-decode",  # 0.5.23 spelling
        "swa_full_tokens_ratio": "--swa-full-tokens-ratio",
        "max_total_tokens": "--max-total-tokens",
        "attention_backend": "--attention-backend",
        "dp_size": "--dp-size",
        "mamba_full_memory_ratio": "--mamba-full-memory-ratio",
        "max_mamba_cache_size": "--max-mamba-cache-size",
        "mamba_ssm_dtype": "--mamba-ssm-dtype",
    }
    for key, flag in flags.items():
        if case.get(key) is not None:
            argv += [flag, str(case[key])]
    if case.get("enable_dp_attention"):
        argv.append("--enable-dp-attention")
    if case.get("disable_cuda_graph"):
        argv.append("--disable-cuda-graph")
    return argv


def _sliding_window(mc: Any) -> int | None:
    """The model file's own get_attention_sliding_window_size, called on the config (no model
    is built); else load_model_utils.resolve_sliding_window_size's fallbacks."""
    from sglang.srt.model_executor.model_runner_components.load_model_utils import (
        resolve_sliding_window_size,
    )
    from sglang.srt.models.registry import ModelRegistry

    shim: Any = types.SimpleNamespace(config=mc.hf_config, text_config=mc.hf_text_config)
    try:
        cls, _ = ModelRegistry.resolve_model_cls(mc.hf_config.architectures)
    except Exception:
        cls = None
    fn = getattr(cls, "get_attention_sliding_window_size", None)
    if fn is not None:
        shim.get_attention_sliding_window_size = types.MethodType(fn, shim)
    return resolve_sliding_window_size(shim, mc)


def _model_head_checks(mc: Any, attn_tp: int) -> None:
    """The model files' attention asserts, restated (no model is built): llama.py, qwen2.py,
    gpt_oss.py `total_num_heads % tp_size == 0` and KV heads divisible by TP or TP a multiple of
    them; deepseek_v2.py `num_heads % attn_tp_size == 0`."""
    heads = mc.num_attention_heads
    assert heads % attn_tp == 0, f"num_attention_heads {heads} % attn_tp_size {attn_tp} != 0"
    if mc.attention_arch == AttentionArch.MLA:
        return
    kv = mc.get_total_num_kv_heads()
    if kv >= attn_tp:
        assert kv % attn_tp == 0, f"num_key_value_heads {kv} % tp_size {attn_tp} != 0"
    else:
        assert attn_tp % kv == 0, f"tp_size {attn_tp} % num_key_value_heads {kv} != 0"


def _configurator(case: dict[str, Any], sa: Any, mc: Any, pp_rank: int) -> Any:
    sched = rc.get_schedule()
    pp = int(case.get("pipeline_parallel_size", 1))
    start, end = get_pp_indices(mc.num_hidden_layers, pp_rank, pp)
    model = types.SimpleNamespace(start_layer=start, end_layer=end)
    swa_ids, full_ids = (None, None)
    if mc.swa_attention_layer_ids is not None:
        owned = range(start, end)
        swa_ids = [i for i in mc.swa_attention_layer_ids if i in owned]
        full_ids = [i for i in mc.full_attention_layer_ids if i in owned]
    layer_info = ModelLayerInfo(
        start_layer=start,
        end_layer=end,
        num_effective_layers=end - start,
        swa_attention_layer_ids=swa_ids,
        full_attention_layer_ids=full_ids,
    )
    kv_str, kv_dtype = configure_kv_cache_dtype(
        server_args_kv_cache_dtype=rc.get_model().kv_cache_dtype,
        model=None,
        model_dtype=mc.dtype,
        is_draft_worker=False,
        is_dflash=False,
        speculative_draft_attention_backend=None,
    )
    spec = SpeculativeAlgorithm.from_string(None)
    widths = {"attn_dp_size": rc.get_parallel().attn_dp_size, "pp_size": pp}
    return _kvc_mod.KVCacheConfigurator(
        device="cuda",
        gpu_id=0,
        **({"ps": types.SimpleNamespace(**widths)} if _CONFIGURATOR_PS else widths),
        pp_group=_Group(pp),
        model=model,
        model_config=mc,
        server_args=sa,
        kv_cache_dtype=kv_dtype,
        kv_cache_dtype_str=kv_str if kv_str is not None else rc.get_model().kv_cache_dtype,
        model_dtype=mc.dtype,
        page_size=sched.page_size,
        sliding_window_size=_sliding_window(mc),
        spec_algorithm=spec,
        is_draft_worker=False,
        post_capture_kv_active=False,
        spec_aux_config=resolve_spec_aux_hidden_state_config(
            server_args=sa, model_config=mc, spec_algorithm=spec, is_draft_worker=False
        ),
        is_hybrid_swa=mc.is_hybrid_swa,
        is_hybrid_swa_compress=mc.is_hybrid_swa_compress,
        use_mla_backend=mc.attention_arch == AttentionArch.MLA,
        layer_info=layer_info,
        forward_stream=None,
        req_to_token_pool=None,
        token_to_kv_pool_allocator=None,
        memory_pool_config=None,
    )


def run_case(case: dict[str, Any], work: Path) -> dict[str, Any]:
    out: dict[str, Any] = {"id": case["id"]}
    model_dir = work / case["id"][:150]
    model_dir.mkdir(parents=True, exist_ok=True)
    (model_dir / "config.json").write_text(json.dumps(case["config"]))
    _FACTS.clear()
    _FACTS["gpu_mib"] = case["gpu_mib"]
    pre = case["free_before_load_bytes"] / GIB
    _FACTS["free_gib"] = pre
    # Only the facts this release knows (is_sm110 is 0.5.22's).
    known = set(getattr(rc, "_PLATFORM_PROBES", ())) | set(getattr(rc, "_PLATFORM_VALUES", ()))
    facts = _platform_facts(case["compute_capability"])
    override = rc.override_platform(**{k: v for k, v in facts.items() if not known or k in known})
    override.install()
    stage = "server_args"
    try:
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                sa = prepare_server_args(_argv(case, str(model_dir)))
        except SystemExit as e:  # argparse refuses a value: its own message
            raise ValueError(f"argparse: {err.getvalue().strip().splitlines()[-1]}") from e
        sa.resolve_once()
        v = resolved_view(sa)
        out.update(
            mem_fraction_static=v.mem_fraction_static,
            chunked_prefill_size=v.chunked_prefill_size,
            cuda_graph_max_bs=v.cuda_graph_config.decode.max_bs,
            prefill_cuda_graph_backend=str(v.cuda_graph_config.prefill.backend),
            page_size=v.page_size,
            attention_backend=v.attention_backend,
        )
        stage = "model_config"
        tp_all = int(case.get("tensor_parallel_size", 1))
        pp_all = int(case.get("pipeline_parallel_size", 1))
        _FACTS["world_size"] = tp_all * pp_all
        groups = {"world_group": _Group(tp_all * pp_all), "tp_group": _Group(tp_all)}
        if _SPAWN_RANKS:
            rc.publish(sa, role="scheduler", ranks=rc.SpawnRanks(world_rank=0, gpu_id=0))
            rc.get_parallel().override_permanently(**groups)
        else:
            rc.publish(sa, role="scheduler")
            scope = rc.get_parallel().override(**groups)
            scope.__enter__()
            _SCOPES.append(scope)
        mc = model_config_of(sa)
        tp = rc.get_parallel().attn_tp_size
        out.update(
            context_len=mc.context_len,
            attn_tp_size=tp,
            kv_heads_per_rank=(
                None if mc.attention_arch == AttentionArch.MLA else mc.get_num_kv_heads(tp)
            ),
            is_hybrid_swa=bool(mc.is_hybrid_swa),
        )
        stage = "model"
        _model_head_checks(mc, tp)
        stage = "kv_cache"
        pp = int(case.get("pipeline_parallel_size", 1))
        # Free memory after the weights load, each rank holding its share.
        _FACTS["free_gib"] = (case["free_before_load_bytes"] - case["weights_bytes_per_rank"]) / GIB
        if pp > 1:
            caps = []
            for r in range(pp):
                kvc = _configurator(case, sa, mc, r)
                budget = kvc._profile_available_bytes(pre)
                caps.append(kvc.config_from_budget(budget).max_total_num_tokens)
            _FACTS["pp_min_tokens"] = min(caps)
        kvc = _configurator(case, sa, mc, 0)
        out["sliding_window_size"] = kvc.sliding_window_size
        config = kvc._resolve_memory_pool_config(pre)
        tokens = int(config.max_total_num_tokens)
        out.update(
            accepted=True,
            stage="ok",
            kv_budget_bytes=kvc._profile_available_bytes(pre),
            max_total_num_tokens=tokens,
            full_max_total_num_tokens=config.full_max_total_num_tokens,
            swa_max_total_num_tokens=config.swa_max_total_num_tokens,
            max_running_requests=int(config.max_running_requests),
            max_mamba_cache_size=rc.get_schedule().max_mamba_cache_size,
            # tp_worker.get_worker_info: max_req_len = min(context_len - 1, tokens - 1).
            max_req_len=min(mc.context_len - 1, tokens - 1),
        )
    except Exception as e:  # SGLang's own refusal, at the stage it came from
        out.update(accepted=False, stage=stage, error=f"{type(e).__name__}: {e}"[:2000])
        if not isinstance(e, (ValueError, AssertionError, RuntimeError)):
            out["traceback"] = traceback.format_exc()[-3000:]
    finally:
        override.restore()
        while _SCOPES:
            _SCOPES.pop().__exit__(None, None, None)
        try:
            rc.get_parallel().clear_stamp()
        except Exception:
            pass
    return out


def main() -> None:
    inputs = json.loads(Path(sys.argv[1]).read_text())
    logging.disable(logging.WARNING)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for case in inputs:
            results.append(run_case(case, Path(tmp)))
    meta = {"sglang_version": sglang.__version__, "torch": torch.__version__}
    Path(sys.argv[2]).write_text(json.dumps({"meta": meta, "results": results}))


if __name__ == "__main__":
    main()
