"""vLLM's own KV-cache sizing for speculative drafts and KV-sharing layers, run on CPU: the oracle
for tests/oracle/test_vllm_oracle_draft.py.

Runs INSIDE the oracle virtualenv beside `vllm_sizing.py`, whose backend choice, layer objects
and group output it reuses. Usage: `python vllm_draft_sizing.py IN.json OUT.json`; each input is a
`vllm_sizing` configuration plus optional `speculative_config` ({method, model: a config object or
None, num_speculative_tokens}).

What is vLLM's code and what is ours, beyond `vllm_sizing`:
- vLLM's: `EngineArgs(speculative_config=...)` builds the real `SpeculativeConfig` (the draft's
  ModelConfig, EAGLE/MTP config rewriting, `n_predict`), and `VllmConfig` its
  `num_lookahead_tokens` / `num_prefill_lookahead_tokens`; the draft layers' specs come from the
  real layer classes' `get_kv_cache_spec`; `get_global_kv_cache_groups` applies
  `extra_retained_tokens`; the rest of the engine-core flow as in `vllm_sizing`.
- Ours: which layers exist, as each model file builds them: the draft's decoder layers (EAGLE:
  the draft config's `num_hidden_layers`; MTP: `n_predict` layers shaped like the target's) on
  the last pipeline stage with `is_draft=True` (what `speculator.load_model` marks), and Gemma-3n's
  `kv_sharing_target_layer_name` (gemma3n.py: the last full layer 1 before the shared ones, the
  last sliding one 2 before), whose layers `attn_utils.get_kv_cache_spec` skips.
"""

from __future__ import annotations

import inspect
import json
import os
import sys
import tempfile
import traceback
import types
from dataclasses import fields, replace
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import vllm_sizing as base
from vllm.config import set_current_vllm_config
from vllm.distributed.utils import get_pp_indices
from vllm.engine.arg_utils import EngineArgs
from vllm.utils.math_utils import cdiv
from vllm.v1.core import kv_cache_utils
from vllm.v1.core.kv_cache_utils import (
    generate_scheduler_kv_cache_config,
    get_kv_cache_capacity,
)
from vllm.v1.kv_cache_interface import FullAttentionSpec, SlidingWindowSpec

try:  # 0.25+: a draft model beside its target shares one group of several page sizes
    from vllm.v1.kv_cache_interface import UniformTypeKVCacheSpecs
except ImportError:
    UniformTypeKVCacheSpecs = ()  # type: ignore[assignment,misc]

# 0.28+: the specs mark a draft's layers (`speculator.load_model`); before, nothing marks them.
HAS_IS_DRAFT = "is_draft" in {f.name for f in fields(FullAttentionSpec)}


def _groups_out(groups: list[Any]) -> list[dict[str, Any]]:
    """`vllm_sizing._groups_out`, with a UniformTypeKVCacheSpecs group (same type, several
    sizes: a draft model beside its target) named by the kind of the specs it holds."""
    out = base._groups_out(groups)
    for row, g in zip(out, groups, strict=True):
        spec = g.kv_cache_spec
        if isinstance(spec, UniformTypeKVCacheSpecs):
            kinds = {base._kind_of(s) for s in spec.kv_cache_specs.values()}
            row["kind"] = kinds.pop() if len(kinds) == 1 else "mixed"
    return out


def _engine_config(c: dict[str, Any], model_dir: str, root: str) -> Any:
    kw: dict[str, Any] = dict(
        model=model_dir,
        skip_tokenizer_init=True,
        tensor_parallel_size=c["tensor_parallel_size"],
        pipeline_parallel_size=c["pipeline_parallel_size"],
        kv_cache_dtype=c["kv_cache_dtype"],
        dtype=c["dtype"],
        max_model_len=c["context_tokens"],
        kv_cache_memory_bytes=c["kv_budget_bytes"],
        max_num_batched_tokens=c["max_num_batched_tokens"],
        async_scheduling=c["async_scheduling"],
    )
    if c.get("block_size") is not None:
        kw["block_size"] = c["block_size"]
    spec = c.get("speculative_config")
    if spec is not None:
        sc: dict[str, Any] = {"method": spec["method"]}
        if spec.get("num_speculative_tokens") is not None:
            sc["num_speculative_tokens"] = spec["num_speculative_tokens"]
        if isinstance(spec.get("model"), dict):
            sc["model"] = base._model_dir(spec["model"], root)
        if spec["method"] == "ngram":
            sc.update(prompt_lookup_max=4, prompt_lookup_min=2)
        kw["speculative_config"] = sc
    return EngineArgs(**kw).create_engine_config()


def _sharing_targets(hf: Any) -> dict[int, int]:
    """gemma3n.py: layer index -> the layer whose cache it reads (shared layers only)."""
    shared = getattr(hf, "num_kv_shared_layers", 0) or 0
    if not shared:
        return {}
    n = hf.num_hidden_layers
    first = n - shared
    out = {}
    for i in range(first, n):
        offset = 2 if hf.layer_types[i] == "sliding_attention" else 1
        if first - offset >= 0:
            out[i] = first - offset
    return out


def _draft_plan(cfg: Any, tp: int) -> list[dict[str, Any]]:
    """The draft's decoder layers as the draft model file builds them (empty for ngram)."""
    sc = cfg.speculative_config
    if sc is None or sc.method == "ngram" or sc.draft_model_config is None:
        return []
    dmc = sc.draft_model_config
    hf = dmc.hf_text_config
    if sc.method == "mtp":
        n = int(getattr(hf, "n_predict", None) or hf.num_nextn_predict_layers)
    else:
        n = int(hf.num_hidden_layers)
    shim = types.SimpleNamespace(model_config=dmc, cache_config=cfg.cache_config)
    saved = hf.num_hidden_layers
    try:
        hf.num_hidden_layers = max(n, 1)
        layers = base._layer_plan(shim, tp)[:n]
    finally:
        hf.num_hidden_layers = saved
    return layers


def _sparse(cfg: Any) -> bool:
    """DeepSeek sparse attention (V3.2): MLA layers with a lightning indexer."""
    hf = cfg.model_config.hf_text_config
    return bool(cfg.model_config.use_mla and getattr(hf, "index_topk", None))


def _select_sparse_backend(cfg: Any, layer: dict[str, Any], user_bs: int | None) -> Any:
    """The first SM90 sparse-MLA backend (in vLLM's priority order) whose declared support
    fits, as `vllm_sizing._select_backend` does for the dense ones."""
    cc, mc = cfg.cache_config, cfg.model_config
    kw: dict[str, Any] = dict(
        use_mla=True,
        device_capability=base.SM90,
        num_heads=layer["num_heads"],
        kv_cache_dtype=cc.cache_dtype,
    )
    if "head_size" in inspect.signature(base._get_backend_priorities).parameters:
        kw["head_size"] = layer["head_size"]  # 0.30+
    order = base._get_backend_priorities(**kw)
    reasons = {}
    for backend in order:
        if "SPARSE" not in backend.name:
            continue
        try:
            cls = backend.get_class()
        except (ImportError, OSError, AssertionError) as e:
            reasons[backend.name] = f"unavailable on CPU: {type(e).__name__}"
            continue
        why = base._backend_ok(
            cls,
            kv_cache_dtype=cc.cache_dtype,
            dtype=mc.dtype,
            head_size=layer["head_size"],
            block_size=user_bs,
            has_sink=False,
        )
        if not why:
            return cls
        reasons[backend.name] = ", ".join(why)
    raise ValueError(f"No valid sparse MLA backend for cuda (SM90). Reasons: {reasons}")


def _indexer_cache(cfg: Any, name: str) -> Any:
    """deepseek_v2.py's DeepseekV32IndexerCache as its constructor sets it up."""
    import torch
    from vllm.model_executor.models.deepseek_v2 import DeepseekV32IndexerCache

    hf = cfg.model_config.hf_text_config
    obj = DeepseekV32IndexerCache.__new__(DeepseekV32IndexerCache)
    torch.nn.Module.__init__(obj)
    obj.head_dim = hf.index_head_dim + hf.index_head_dim // 128 * 4  # quant_block_size 128
    obj.dtype = torch.uint8
    obj.prefix = name
    obj.cache_config = cfg.cache_config
    return obj


def _make_sparse(obj: Any, cfg: Any, backend: Any) -> None:
    """What MLAAttention.__init__ sets for a layer with an indexer: the canonical sparse cache
    dtype (fp8 → fp8_ds_mla on FlashMLA-sparse) and the top-k buffer width."""
    from vllm.model_executor.layers.attention.mla_attention import (
        _canonicalize_sparse_mla_kv_cache_dtype,
    )

    dtype = _canonicalize_sparse_mla_kv_cache_dtype(backend, cfg.cache_config.cache_dtype)
    obj.kv_cache_dtype = dtype
    obj.indexer = object()
    obj.topk_buffer_width = cfg.model_config.hf_text_config.index_topk


def _retained(groups: list[Any]) -> int | None:
    """The sliding windows' `extra_retained_tokens` (0.28+; 0 before, which keeps none)."""
    retained = {
        getattr(g.kv_cache_spec, "extra_retained_tokens", 0)
        for g in groups
        if isinstance(g.kv_cache_spec, SlidingWindowSpec)
    }
    return max(retained) if retained else None


def _plan_kv_cache(
    cfg: Any, specs: list[dict[str, Any]], available: list[int], search_cap: int, out: Any
) -> list[Any]:
    """vllm_sizing's planning step (0.33's API, or 0.21-0.32's one call), with the global
    groups' `extra_retained_tokens` recorded as `get_global_kv_cache_groups` /
    `get_kv_cache_groups` returns them (before any refusal)."""
    if base.PLANNING_API:
        mc = cfg.model_config
        groups = base.get_global_kv_cache_groups(cfg, specs)
        out["extra_retained_tokens"] = _retained(groups)
        builder = base.get_kv_cache_config_builder(cfg)
        projected = [base._project_kv_cache_groups_to_worker(groups, s) for s in specs]
        saved = mc.max_model_len
        mc.max_model_len = search_cap
        try:
            out["longest_context_tokens"] = min(
                base._estimate_max_model_len_from_groups(
                    builder,
                    cfg,
                    pg,
                    mem - base._pool_bytes_per_block_from_builder(builder, cfg, pg),
                )
                for pg, mem in zip(projected, available, strict=True)
            )
        finally:
            mc.max_model_len = saved
        return base.get_kv_cache_configs(cfg, specs, available, groups)
    real_groups = kv_cache_utils.get_kv_cache_groups

    def groups_seen(*args: Any, **kwargs: Any) -> Any:
        groups = real_groups(*args, **kwargs)
        out["extra_retained_tokens"] = _retained(groups)
        return groups

    kv_cache_utils.get_kv_cache_groups = groups_seen
    try:
        return base._plan_kv_cache_in_one_call(cfg, specs, available, search_cap, out)
    finally:
        kv_cache_utils.get_kv_cache_groups = real_groups
        out.pop("global_groups", None)  # not in this harness's answers


def _one(c: dict[str, Any], root: str) -> dict[str, Any]:
    out: dict[str, Any] = {"id": c["id"], "accepted": False, "stage": None, "error": None}
    try:
        cfg = _engine_config(c, base._model_dir(c["config"], root), root)
    except Exception as e:
        base.raise_if_harness_error(e)
        out.update(stage="config", error=f"{type(e).__name__}: {e}"[:2000])
        return out
    mc, cc, pc, sc = cfg.model_config, cfg.cache_config, cfg.parallel_config, cfg.scheduler_config
    out.update(
        async_scheduling=bool(sc.async_scheduling),
        max_model_len=mc.max_model_len,
        model_max_len=base._model_max_len(cfg),
        cache_dtype=cc.cache_dtype,
        max_in_flight_tokens=getattr(cfg, "max_in_flight_tokens", None),  # 0.26+
        num_speculative_tokens=cfg.num_speculative_tokens,
        num_lookahead_tokens=cfg.num_lookahead_tokens,
        num_prefill_lookahead_tokens=getattr(cfg, "num_prefill_lookahead_tokens", None),
    )
    tp, pp = pc.tensor_parallel_size, pc.pipeline_parallel_size
    try:
        layers = base._layer_plan(cfg, tp)
        draft = _draft_plan(cfg, tp)
    except (AssertionError, ZeroDivisionError) as e:
        out.update(stage="model", error=f"{type(e).__name__}: {e}")
        return out
    out["draft_layers"] = len(draft)
    targets = _sharing_targets(mc.hf_text_config)
    user_bs = cc.block_size if cc.user_specified_block_size else None
    try:
        backends = {}
        sparse = _sparse(cfg)
        for layer in layers + draft:
            key = (layer["cls"] == "mla", layer.get("has_sink", False))
            if key not in backends and sparse and key[0]:
                backends[key] = _select_sparse_backend(cfg, layer, user_bs)
            if key not in backends:
                backends[key] = base._select_backend(
                    use_mla=key[0],
                    kv_cache_dtype=cc.cache_dtype,
                    dtype=mc.dtype,
                    head_size=layer["head_size"],
                    block_size=user_bs,
                    num_heads=layer["num_heads"],
                    has_sink=key[1],
                )
        distinct = list(dict.fromkeys(backends.values()))
        if sparse:
            from vllm.model_executor.models.deepseek_v2 import DeepseekV32IndexerBackend

            distinct.append(DeepseekV32IndexerBackend)
        if user_bs is None:
            cc.block_size = base._preferred_block_size(distinct, backends, layers, cfg)
    except Exception as e:
        out.update(stage="backend", error=f"{type(e).__name__}: {e}"[:2000])
        return out
    out["block_size"] = cc.block_size

    specs: list[dict[str, Any]] = []
    n = len(layers)
    with set_current_vllm_config(cfg):
        for rank in range(pp):
            lo, hi = get_pp_indices(n, rank, pp)
            stage = {}
            for layer in layers[lo:hi]:
                if layer["index"] in targets:
                    continue  # attn_utils.get_kv_cache_spec: a KV-sharing layer has no spec
                b = backends[(layer["cls"] == "mla", layer.get("has_sink", False))]
                obj = base._make_layer(cfg, layer, b)
                name = f"model.layers.{layer['index']}.self_attn"
                if sparse:
                    _make_sparse(obj, cfg, b)
                    indexer = _indexer_cache(cfg, f"{name}.indexer.k_cache")
                    stage[f"{name}.attn"] = obj.get_kv_cache_spec(cfg)
                    stage[f"{name}.indexer.k_cache"] = indexer.get_kv_cache_spec(cfg)
                    continue
                stage[f"{name}.attn"] = obj.get_kv_cache_spec(cfg)
            if rank == pp - 1:
                for j, layer in enumerate(draft):
                    b = backends[(layer["cls"] == "mla", layer.get("has_sink", False))]
                    obj = base._make_layer(cfg, layer, b)
                    spec = obj.get_kv_cache_spec(cfg)
                    if HAS_IS_DRAFT:
                        spec = replace(spec, is_draft=True)
                    stage[f"drafter.model.layers.{n + j}.self_attn.attn"] = spec
            specs.append(stage)
    first = next(iter(specs[0].values()))
    out["kv_heads_per_rank"] = getattr(first, "num_kv_heads", None)
    out["page_bytes_per_layer"] = first.page_size_bytes
    out["kv_layers"] = sum(len(s) for s in specs)
    budget = c["kv_budget_bytes"]
    available = [budget] * pp
    try:
        if base.resolve_kv_cache_layout is not None:  # 0.29+
            layouts = [x.name for x in base.get_supported_kv_cache_layouts(distinct)]
            base.resolve_kv_cache_layout(
                cfg, [layouts] * pp, [s for st in specs for s in st.values()]
            )
        configs = _plan_kv_cache(cfg, specs, available, int(c["longest_search_cap"]), out)
    except Exception as e:
        out.update(stage="kv_cache", error=f"{type(e).__name__}: {e}"[:2000])
        return out
    sched = generate_scheduler_kv_cache_config(configs)
    tokens, concurrency = get_kv_cache_capacity(cfg, sched)
    per_group = [
        cdiv(g.kv_cache_spec.max_memory_usage_bytes(cfg), g.kv_cache_spec.page_size_bytes)
        for g in sched.kv_cache_groups
    ]
    # The scheduler's groups are worker 0's (first PP stage), as in vllm_sizing; a draft on the
    # last stage is not in them.
    out["groups"] = _groups_out(sched.kv_cache_groups)
    for g, need in zip(out["groups"], per_group, strict=True):
        g["blocks_per_request"] = need
    bpr = sum(per_group)
    out.update(decoding_admission(cfg, sched))
    out.update(
        accepted=True,
        num_blocks=sched.num_blocks,
        blocks_per_request=bpr,
        resident_requests=(sched.num_blocks - 1) // bpr,
        logged_tokens=tokens,
        logged_concurrency=round(concurrency, 2),
    )
    return out


def decoding_admission(cfg: Any, sched: Any) -> dict[str, Any]:
    """With vLLM's own KVCacheManager: how many requests of about half max_model_len can decode
    at once. Each is prefilled (`allocate_slots(L, num_lookahead_tokens)`), samples a token,
    then schedules it with its k draft tokens (`allocate_slots(1 + k, num_lookahead_tokens)`),
    as the scheduler does; requests are admitted until allocate_slots refuses. Full / MLA groups
    only (a whole-prompt allocation of a window request takes every block), and only when
    cheap."""
    from vllm.sampling_params import SamplingParams
    from vllm.v1.core.kv_cache_manager import KVCacheManager
    from vllm.v1.request import Request

    kinds = {base._kind_of(g.kv_cache_spec) for g in sched.kv_cache_groups}
    max_len = cfg.model_config.max_model_len
    k, lookahead = cfg.num_speculative_tokens, cfg.num_lookahead_tokens
    bs = min(g.kv_cache_spec.block_size for g in sched.kv_cache_groups)
    # About half max_model_len, with the request's own tokens ending on a block boundary, so
    # any reserved slot past them takes one more block.
    length = max(bs, max_len // 2 // bs * bs) - 1
    rough = (sched.num_blocks - 1) // max(1, len(sched.kv_cache_groups) * cdiv(length, bs))
    if not kinds <= {"full", "mla"} or rough > 48 or length * (rough + 1) > (1 << 22):
        return {}
    kw: dict[str, Any] = dict(
        kv_cache_config=sched,
        max_model_len=max_len,
        scheduler_block_size=cfg.cache_config.block_size,
        hash_block_size=cfg.cache_config.block_size,
        enable_caching=False,
    )
    # The admission cap's input: max_in_flight_tokens (0.26+), max_num_batched_tokens before.
    accepted = inspect.signature(KVCacheManager.__init__).parameters
    if "max_in_flight_tokens" in accepted:
        kw["max_in_flight_tokens"] = cfg.max_in_flight_tokens
    else:
        kw["max_num_batched_tokens"] = cfg.scheduler_config.max_num_batched_tokens
    manager = KVCacheManager(**{k: v for k, v in kw.items() if k in accepted})
    admitted = 0
    while admitted <= rough + 2:
        req = Request(f"r{admitted}", [0] * length, SamplingParams(max_tokens=8), None)
        if manager.allocate_slots(req, length, num_lookahead_tokens=lookahead) is None:
            break
        req.num_computed_tokens = length
        req.append_output_token_ids(0)
        req.spec_token_ids = [0] * k
        if manager.allocate_slots(req, 1 + k, num_lookahead_tokens=lookahead) is None:
            break
        admitted += 1
    # The request now holds length + 1 tokens of its own (prompt and one sampled).
    return {"decoding_context_tokens": length + 1, "decoding_requests": admitted}


def main() -> int:
    src, dst = sys.argv[1], sys.argv[2]
    with open(src) as f:
        configs = json.load(f)
    results = []
    with tempfile.TemporaryDirectory(prefix="vllm-draft-oracle-") as root:
        for c in configs:
            try:
                results.append(_one(c, root))
            except Exception:  # a harness bug, not a vLLM refusal: say so loudly
                results.append(
                    {
                        "id": c["id"],
                        "accepted": False,
                        "stage": "harness",
                        "error": traceback.format_exc()[-3000:],
                    }
                )
    meta = {"vllm_version": base.vllm.__version__, "torch": base.torch.__version__}
    with open(dst, "w") as f:
        json.dump({"meta": meta, "results": results}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
