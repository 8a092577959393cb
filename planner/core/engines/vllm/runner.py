"""Which model runner vLLM picks, and the batches it keeps in flight (VllmConfig)."""

from __future__ import annotations

from planner.core.engines.versions import Version, since
from planner.core.engines.vllm.releases import (
    DENSE_V2_RUNNER_SINCE,
    V2_RUNNER_MOE_ARCHITECTURES,
    V2_RUNNER_SINCE,
    V2_RUNNER_SPEC_METHODS,
)
from planner.core.model import ModelShape


def v2_runner(version: Version, shape: ModelShape | None, spec: str | None, pp: int) -> bool:
    """VllmConfig.use_v2_model_runner without VLLM_USE_V2_MODEL_RUNNER, on a CUDA machine."""
    if since(version, V2_RUNNER_SINCE):
        return True
    if shape is None or not since(version, DENSE_V2_RUNNER_SINCE):
        return False
    if spec is not None and (spec not in V2_RUNNER_SPEC_METHODS or (spec == "eagle3" and pp > 1)):
        return False  # _get_v2_model_runner_unsupported_features
    # _is_default_v2_model_runner_model: hybrids (state layers) and attention-free models stay
    # on V1; MoE models (any routed experts) unless their architecture is listed.
    if shape.has_state:
        return False
    firsts = [V2_RUNNER_MOE_ARCHITECTURES.get(a) for a in shape.architectures]
    listed = any(first is not None and since(version, first) for first in firsts)
    return listed or not shape.num_experts


def concurrent_batches(
    version: Version, async_on: bool, pp: int, shape: ModelShape | None, spec: str | None
) -> int:
    """VllmConfig.max_concurrent_batches: PP fills the pipeline with pp batches; async
    scheduling overlaps one more on the V2 runner, on V1 only without PP (2)."""
    if async_on:
        if v2_runner(version, shape, spec, pp):
            return pp + 1
        if pp <= 1:
            return 2
    return pp


__all__ = ["concurrent_batches", "v2_runner"]
