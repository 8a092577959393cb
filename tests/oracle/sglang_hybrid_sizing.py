"""SGLang's own start-up sizing of hybrid pools, run on a CPU host: `sglang_sizing.py`'s path (its
stubs, its `run_case`) over the hybrid models, reporting the pools as SGLang's configurator
computes them besides the token pool:

- Mamba / GDN / KDA hybrids (`mambaish_config`): the state bytes one slot holds
  (`mamba2_cache_params.mamba_cache_per_req`, every state layer, conv in its dtype and the SSM
  state in `mamba2_state_dtype`), the state slots `_handle_max_mamba_cache` settles on (from
  `--mamba-full-memory-ratio`, or `--max-mamba-cache-size`) and the slots one running request
  takes (`_calculate_mamba_ratio`), which cap `max_running_requests`;
- hybrid sliding-window models (`HybridSWAPoolConfigurator`): the full and SWA pools' tokens
  (already in `sglang_sizing`'s output) and the sliding window the pool sees.

Two things differ from `sglang_sizing`'s loop, each for a fact of these models:
- `--mamba-ssm-dtype` reaches the state pool through the environment (serving_hook sets
  SGLANG_MAMBA_SSM_DTYPE), which would outlive its case in one process: each case starts
  without it, as a fresh server does;
- a multimodal wrapper's `get_attention_sliding_window_size` asks its `language_model` (Gemma-3's
  gemma3_mm.py): the shim gets one, the text model class (from the registry) on the text config.

Runs inside an SGLang release's own virtualenv:

    python sglang_hybrid_sizing.py inputs.json outputs.json
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import sglang_sizing as base

_SEEN: dict[str, Any] = {}
_resolve = base._kvc_mod.KVCacheConfigurator._resolve_memory_pool_config


def _resolve_and_record(self: Any, pre_model_load_memory: int) -> Any:
    """The configurator's own resolution, recording its state-pool facts as it goes."""
    _SEEN.clear()
    mc = self.mambaish_config
    if mc is not None:
        params = mc.mamba2_cache_params
        _SEEN.update(
            state_bytes_per_slot=int(params.mamba_cache_per_req),
            state_layers=len(params.layers),
            state_conv_dtype=str(params.dtype.conv).removeprefix("torch."),
            state_ssm_dtype=str(params.dtype.temporal).removeprefix("torch."),
            state_slots_per_request=int(self._calculate_mamba_ratio()),
        )
    if self.model_config.is_hybrid_swa:
        # The sliding layers' KV heads per rank (model_config.get_swa_num_kv_heads): for
        # Gemma-4 they differ from the full layers' (get_num_kv_heads).
        _SEEN["swa_kv_heads_per_rank"] = self.model_config.get_swa_num_kv_heads(
            base.rc.get_parallel().attn_tp_size
        )
    config = _resolve(self, pre_model_load_memory)
    if mc is not None:
        _SEEN["state_pool_slots"] = base.rc.get_schedule().max_mamba_cache_size
    return config


base._kvc_mod.KVCacheConfigurator._resolve_memory_pool_config = _resolve_and_record  # type: ignore[method-assign]

# The text model class a multimodal wrapper's language_model is (its own model file).
_LANGUAGE_MODELS = {"Gemma3ForConditionalGeneration": "Gemma3ForCausalLM"}
_sliding_window = base._sliding_window


def _sliding_window_with_language_model(mc: Any) -> int | None:
    arch = (mc.hf_config.architectures or [None])[0]
    text_arch = _LANGUAGE_MODELS.get(arch)
    if text_arch is None:
        return _sliding_window(mc)
    from sglang.srt.model_executor.model_runner_components.load_model_utils import (
        resolve_sliding_window_size,
    )
    from sglang.srt.models.registry import ModelRegistry

    wrapper_cls, _ = ModelRegistry.resolve_model_cls(mc.hf_config.architectures)
    text_cls, _ = ModelRegistry.resolve_model_cls([text_arch])
    lm: Any = types.SimpleNamespace(config=mc.hf_text_config)
    lm.get_attention_sliding_window_size = types.MethodType(
        text_cls.get_attention_sliding_window_size, lm
    )
    shim: Any = types.SimpleNamespace(
        config=mc.hf_config, text_config=mc.hf_text_config, language_model=lm
    )
    shim.get_attention_sliding_window_size = types.MethodType(
        wrapper_cls.get_attention_sliding_window_size, shim
    )
    return resolve_sliding_window_size(shim, mc)


base._sliding_window = _sliding_window_with_language_model


def main() -> None:
    inputs = json.loads(Path(sys.argv[1]).read_text())
    logging.disable(logging.WARNING)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for case in inputs:
            _SEEN.clear()
            os.environ.pop("SGLANG_MAMBA_SSM_DTYPE", None)
            out = base.run_case(case, Path(tmp))
            out.update(_SEEN)
            results.append(out)
    meta = {"sglang_version": base.sglang.__version__, "torch": base.torch.__version__}
    Path(sys.argv[2]).write_text(json.dumps({"meta": meta, "results": results}))


if __name__ == "__main__":
    main()
