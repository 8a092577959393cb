"""SGLang's Mamba / linear-attention state pool, as `mem_cache/kv_cache_configurator.py` (0.5.23)
sizes it for a "mambaish" model (Mamba2, gated delta nets, Kimi delta attention):

- one slot holds every state layer of a rank: the conv state in SGLANG_MAMBA_CONV_DTYPE
  (bfloat16) and the recurrent (SSM) state in `mamba2_state_dtype` (--mamba-ssm-dtype, else the
  config's `mamba_ssm_dtype`, else float32) (`configs/mamba_utils.py` mamba_cache_per_req);
- `_handle_max_mamba_cache`: --max-mamba-cache-size slots (per attention-DP shard), or with the
  radix cache off and --max-running-requests that many, else
  int((rest × r / (1 + r) − slot) // slot) for r = --mamba-full-memory-ratio (default 0.9); the
  pool holds one padding slot more, and the KV pool gets what is left of the rest;
- `resolve_max_num_reqs`: the running requests are at most slots // `_calculate_mamba_ratio`
  (3 slots a request, 5 with the radix cache's extra buffer under the overlap scheduler, 1 with
  the radix cache off).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from planner.core.specs import LayerSpec
from planner.core.specs_state import (
    GatedDeltaNetSpec,
    KimiDeltaSpec,
    Mamba2Spec,
    StateSpec,
)

GiB = 1 << 30
# SGLANG_MAMBA_CONV_DTYPE's default (environ.py): bfloat16.
CONV_DTYPE_BYTES = 2
SSM_DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "fp32": 4, "bf16": 2, "fp16": 2}
# schedule.py mamba_full_memory_ratio fallback.
MAMBA_FULL_MEMORY_RATIO = 0.9
# kv_cache_configurator.MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO, and the tracking slots the
# extra buffer adds under the overlap scheduler (allocation_sizing.get_mamba_tracking_slots).
SLOTS_PER_REQUEST = 3
EXTRA_BUFFER_SLOTS = 2
# The state mixers whose SGLang state pool kvplan models (checked by the oracle's hybrid grid).
MODELLED = (Mamba2Spec, GatedDeltaNetSpec, KimiDeltaSpec)

# arg_groups/overrides.py (0.5.23): the architectures whose radix cache keeps Mamba states
# (_MAMBA_RADIX_CACHE_ARCHS) and those that take the extra buffer with it
# (_MAMBA_EXTRA_BUFFER_ARCHS, under the default triton linear-attention backend); with both,
# the default strategy is extra_buffer (the overlap scheduler is on), else no_buffer.
RADIX_CACHE_ARCHS = frozenset({
    "KimiLinearForCausalLM", "Qwen3NextForCausalLM", "Qwen3_5MoeForConditionalGeneration",
    "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForCausalLM", "Qwen3_5ForCausalLM",
    "NemotronHForCausalLM", "NemotronHPuzzleForCausalLM", "FalconH1ForCausalLM",
    "Lfm2ForCausalLM", "Lfm2MoeForCausalLM",
    # GraniteMoeHybrid: when any layer is a Mamba one (a hybrid, here always).
    "GraniteMoeHybridForCausalLM",
})  # fmt: skip
EXTRA_BUFFER_ARCHS = frozenset({
    "KimiLinearForCausalLM", "Qwen3_5ForConditionalGeneration",
    "Qwen3_5MoeForConditionalGeneration", "Qwen3_5MoeForCausalLM", "Qwen3_5ForCausalLM",
    "Qwen3NextForCausalLM", "FalconH1ForCausalLM", "GraniteMoeHybridForCausalLM",
    "NemotronHForCausalLM",
})  # fmt: skip


# model_overrides/qwen3_5.py: on SM100 with no --attention-backend these hybrids run the triton
# backend at page 1 (over any --page-size); granitemoehybrid.py: a Mamba GraniteMoeHybrid runs
# flashinfer there (the page as asked); other hybrids take trtllm_mha's pages.
SM100_TRITON_ARCHS = frozenset({
    "Qwen3NextForCausalLM", "Qwen3_5MoeForConditionalGeneration",
    "Qwen3_5ForConditionalGeneration",
})  # fmt: skip
SM100_FLASHINFER_ARCHS = frozenset({"GraniteMoeHybridForCausalLM"})


def ssm_dtype_of(spec: StateSpec, requested: str | None) -> str:
    """mamba2_state_dtype: --mamba-ssm-dtype, else the config's mamba_ssm_dtype (kvplan reads
    it for the Qwen3.5 family), else float32."""
    if requested is not None:
        return requested
    own = getattr(spec, "ssm_dtype", "model") if isinstance(spec, GatedDeltaNetSpec) else "model"
    return "float32" if own == "model" else own


def slot_parts(stack: tuple[tuple[LayerSpec, int], ...], ssm_dtype: str | None) -> tuple[int, int]:
    """(conv, SSM) bytes of one slot over a rank's state layers: conv × 2, SSM × its bytes."""
    conv_total = ssm_total = 0
    for spec, n in stack:
        if not isinstance(spec, StateSpec):
            continue
        conv, *temporal = spec.shapes()
        conv_total += n * prod(conv) * CONV_DTYPE_BYTES
        ssm_total += (
            n * sum(prod(t) for t in temporal) * SSM_DTYPE_BYTES[ssm_dtype_of(spec, ssm_dtype)]
        )
    return conv_total, ssm_total


def slot_bytes(stack: tuple[tuple[LayerSpec, int], ...], ssm_dtype: str | None) -> int:
    """mamba_cache_per_req: one slot of every state layer on a rank."""
    return sum(slot_parts(stack, ssm_dtype))


def slots_per_request(architecture: str | None, radix_cache: bool) -> int:
    """_calculate_mamba_ratio: the state slots one running request may hold."""
    if not radix_cache:
        return 1
    if architecture in RADIX_CACHE_ARCHS and architecture in EXTRA_BUFFER_ARCHS:
        return SLOTS_PER_REQUEST + EXTRA_BUFFER_SLOTS
    return SLOTS_PER_REQUEST


@dataclass(frozen=True, slots=True)
class StatePool:
    """The state slots and the bytes left to the KV pool, out of `rest_bytes`."""

    slots: int
    slot_bytes: int
    slots_per_request: int
    kv_bytes: int

    @property
    def running_cap(self) -> int:
        return max(0, self.slots) // self.slots_per_request


def state_pool(
    rest_bytes: int,
    per_slot: int,
    *,
    ratio: float | None,
    max_slots: int | None,
    running: int | None,
    radix_cache: bool,
    per_request: int,
    attn_dp: int = 1,
) -> StatePool:
    """_handle_max_mamba_cache, on the rest SGLang profiled (bytes)."""
    if max_slots is not None:
        slots = max_slots // attn_dp
    elif not radix_cache and running is not None:
        slots = max(1, running // attn_dp)
    else:
        r = MAMBA_FULL_MEMORY_RATIO if ratio is None else ratio
        budget = rest_bytes / GiB * r / (1 + r) * GiB
        slots = int((budget - per_slot) // per_slot)
    kv = rest_bytes - (slots + 1) * per_slot if slots > 0 else rest_bytes
    return StatePool(slots, per_slot, per_request, kv)


__all__ = [
    "MAMBA_FULL_MEMORY_RATIO",
    "MODELLED",
    "SM100_FLASHINFER_ARCHS",
    "SM100_TRITON_ARCHS",
    "StatePool",
    "slot_bytes",
    "slot_parts",
    "slots_per_request",
    "ssm_dtype_of",
    "state_pool",
]
