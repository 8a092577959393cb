"""SGLang's own start-up sizing before 0.5.21: `sglang_sizing.py`'s path, with the two facts of
the older layer bookkeeping restated (sglang-0.5.20 wheel):

- `ModelLayerInfo` (model_executor/model_runner_components/layer_setup.py) holds only the layer
  range; the configurator filters `model_config.swa_attention_layer_ids` to it itself
  (mem_cache/kv_cache_configurator.py), so the per-rank ids the harness passes are dropped;
- `ModelConfig.swa_attention_layer_ids` is set only for hybrid SWA models
  (configs/model_config.py); 0.5.21 declares it None for the others, which the harness reads;
- the model runner narrows a hybrid SWA model's layer ids to its pipeline stage in the model
  config itself, before the pools are sized (model_runner.py calls layer_setup.py
  `adjust_hybrid_swa_layer_ids` after the weights load): SGLang's own function runs here on a
  copy of the config per stage.

    python sglang_sizing_0_20.py inputs.json outputs.json
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import sglang_sizing as base
from sglang.srt.configs.model_config import ModelConfig
from sglang.srt.model_executor.model_runner_components import layer_setup

_LayerInfo = base.ModelLayerInfo


def _layer_range(
    *, swa_attention_layer_ids: Any = None, full_attention_layer_ids: Any = None, **k: Any
) -> Any:
    return _LayerInfo(**k)


if "swa_attention_layer_ids" not in _LayerInfo.__struct_fields__:
    base.ModelLayerInfo = _layer_range  # type: ignore[assignment]
if not hasattr(ModelConfig, "swa_attention_layer_ids"):
    ModelConfig.swa_attention_layer_ids = None  # type: ignore[attr-defined]

_configurator = base._configurator


def _stage_configurator(case: dict[str, Any], sa: Any, mc: Any, pp_rank: int) -> Any:
    adjust = getattr(layer_setup, "adjust_hybrid_swa_layer_ids", None)
    if adjust is not None and mc.is_hybrid_swa:
        pp = int(case.get("pipeline_parallel_size", 1))
        start, end = base.get_pp_indices(mc.num_hidden_layers, pp_rank, pp)
        mc = copy.copy(mc)
        adjust(model_config=mc, start_layer=start, end_layer=end, is_hybrid_swa=True)
    return _configurator(case, sa, mc, pp_rank)


base._configurator = _stage_configurator
main = base.main

if __name__ == "__main__":
    main()
