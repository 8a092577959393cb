"""State layers: a per-request state of constant size (vLLM `MambaSpec`).

Mamba/Mamba2 mixers, gated delta nets (Qwen3-Next), Kimi delta attention (Kimi-Linear), short
convolutions (LFM2) and lightning linear attention (MiniMax) keep a state whose size does not
depend on the context: a convolution window and a recurrent (SSM) state. Shapes follow vLLM's
`MambaStateShapeCalculator` (`model_executor/layers/mamba/mamba_utils.py`), dtypes its
`MambaStateDtypeCalculator`; transformers' cache classes store the same tensors.

A spec is made from the config unbound (no speculative tokens, model dtype unknown) and bound by
the engine once the model dtype, tensor parallelism and cache mode are known (`bind`); the
model's shape keeps the whole (tp 1) state, `on_rank` gives a rank's. Bytes per token are 0:
nothing grows with the context.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from math import prod
from typing import ClassVar, Literal

from planner.core.specs import LayerSpec, WindowPolicy
from planner.core.units import KVDtype

# Which dtype a state tensor has: the model's ("model"; vLLM mamba_cache_dtype auto) or fp32.
StateDtype = Literal["model", "fp32", "bf16", "fp16"]
DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}


def _divide(a: int, b: int) -> int:
    # vllm.distributed.divide asserts divisibility; validate_state_tp refuses before this.
    return a // b


@dataclass(frozen=True, slots=True)
class StateSpec(LayerSpec):
    """One state layer as one rank stores it. `kv_heads`/`head_size*` are unused (0)."""

    # Bound by the engine (`bind`):
    tp: int = 1
    num_spec: int = 0  # speculative tokens: the conv window grows by them
    model_dtype_bytes: int = 2
    page_padded_bytes: int | None = None  # vLLM pads the state page to the attention page
    padded_at_tp: int = 1  # the TP the padding was computed for (a rank's page)
    held_blocks: int = 1  # blocks the engine reserves for one request
    block_tokens: int | None = None  # vLLM mamba_block_size (its group's block size)
    # vLLM mamba_cache_mode "all": a state block for every block_tokens tokens of a request,
    # besides the held_blocks (then its speculative blocks)
    per_block: bool = False
    # Conv columns kept beyond kernel − 1 (transformers keeps the whole kernel: 1).
    conv_extra: int = 0
    # The engine keeps the recurrent (SSM) state in fp32 whatever the model dtype (transformers'
    # torch implementations of Mamba2 and the gated delta rule).
    recurrent_fp32: bool = False

    kind: ClassVar[str] = "mamba"
    family: ClassVar[str] = "mamba"  # never one group with attention (vLLM MambaSpec)
    mixer: ClassVar[str] = "mamba"
    prefix_shareable: ClassVar[bool] = False
    grows_with_context: ClassVar[bool] = False
    # Blocks vLLM's layer declares for prefill checkpoints in align mode.
    checkpoint_blocks: ClassVar[int] = 0

    # -- the state's shapes and dtypes (vLLM MambaStateShapeCalculator) --------------------
    def shapes(self) -> tuple[tuple[int, ...], ...]:
        raise NotImplementedError

    def dtypes(self) -> tuple[StateDtype, ...]:
        return ("model", self.recurrent("model"))

    def window(self, kernel: int) -> int:
        """Conv columns kept: kernel − 1, plus speculative tokens, plus the engine's extra."""
        return kernel - 1 + self.num_spec + self.conv_extra

    def recurrent(self, default: StateDtype) -> StateDtype:
        return "fp32" if self.recurrent_fp32 else default

    def tp_divisors(self) -> tuple[tuple[str, int], ...]:
        """(config field, value) pairs that tensor parallelism must divide."""
        return ()

    @property
    def state_bytes(self) -> int:
        """The state's own bytes (vLLM `MambaSpec.real_page_size_bytes`)."""
        return sum(
            prod(shape) * (self.model_dtype_bytes if dt == "model" else DTYPE_BYTES[dt])
            for shape, dt in zip(self.shapes(), self.dtypes(), strict=True)
        )

    # -- LayerSpec --------------------------------------------------------------------------
    @property
    def elements_per_token(self) -> int:
        return 0

    def bytes_per_token(self, dtype: KVDtype) -> int:
        return 0

    def page_bytes(self, dtype: KVDtype, block_size: int) -> int:
        if self.page_padded_bytes is not None and self.tp == self.padded_at_tp:
            return self.page_padded_bytes
        return self.state_bytes

    def tokens_kept(self, ctx: int, policy: WindowPolicy) -> int:
        return 0

    def request_bytes(self, ctx: int, policy: WindowPolicy, dtype: KVDtype) -> int:
        return self.state_bytes

    def paged_request(
        self, ctx: int, policy: WindowPolicy, dtype: KVDtype, block_size: int
    ) -> tuple[int, int]:
        held = self.cyclic_blocks(ctx, self.block_tokens or block_size)
        return held, held * self.page_bytes(dtype, block_size)

    def admission_blocks(self, ctx: int, block_size: int, in_flight_tokens: int) -> int:
        return self.cyclic_blocks(ctx, block_size)

    def cyclic_blocks(self, ctx: int, block_size: int) -> int:
        # MambaSpec.max_memory_usage_bytes: cdiv(max_model_len, block) + speculative in "all"
        return self.held_blocks + (-(-ctx // block_size) if self.per_block else 0)

    def group_block_size(self, block_size: int) -> int:
        return self.block_tokens or block_size

    def per_rank(self, kv_heads: int) -> LayerSpec:
        return self

    def on_rank(self, tp: int, kv_heads: int) -> LayerSpec:
        return self if tp == self.tp else replace(self, tp=tp)

    def bind(
        self,
        *,
        model_dtype: str,
        num_spec: int = 0,
        page_padded_bytes: int | None = None,
        padded_at_tp: int = 1,
        held_blocks: int = 1,
        block_tokens: int | None = None,
        conv_extra: int = 0,
        recurrent_fp32: bool = False,
        per_block: bool = False,
    ) -> StateSpec:
        return replace(
            self,
            per_block=per_block,
            conv_extra=conv_extra,
            recurrent_fp32=recurrent_fp32,
            model_dtype_bytes=DTYPE_BYTES.get(model_dtype, 2),
            num_spec=num_spec,
            page_padded_bytes=page_padded_bytes,
            padded_at_tp=padded_at_tp,
            held_blocks=held_blocks,
            block_tokens=block_tokens,
        )


def _conv(dim: int, state_len: int) -> tuple[int, int]:
    # vLLM's default "SD" layout: (state_len, dim); only the product matters for bytes.
    return (state_len, dim)


@dataclass(frozen=True, slots=True)
class Mamba1Spec(StateSpec):
    """Mamba (Jamba): conv (d_conv − 1, expand·hidden / tp), SSM (expand·hidden / tp, d_state).
    The conv window does not grow with speculative tokens (mamba1_state_shape)."""

    intermediate: int = 0
    state_size: int = 0
    conv_kernel: int = 4
    mixer: ClassVar[str] = "mamba1"

    def shapes(self) -> tuple[tuple[int, ...], ...]:
        inner = _divide(self.intermediate, self.tp)
        return (_conv(inner, self.conv_kernel - 1 + self.conv_extra), (inner, self.state_size))

    def tp_divisors(self) -> tuple[tuple[str, int], ...]:
        return (("mamba_expand × hidden_size", self.intermediate),)


@dataclass(frozen=True, slots=True)
class Mamba2Spec(StateSpec):
    """Mamba2 (granite-4.0-h, Falcon-H1, Nemotron-H, Bamba): conv (d_conv − 1 + spec,
    (intermediate + 2·groups·d_state) / tp), SSM (heads / tp, head_dim, d_state). n_groups that
    tp does not divide are replicated up to tp (extra_groups_for_head_shards)."""

    intermediate: int = 0
    n_groups: int = 1
    num_heads: int = 0
    head_dim: int = 0
    state_size: int = 0
    conv_kernel: int = 4
    # NemotronH: the config's mamba_ssm_cache_dtype, else fp32 (update_mamba_ssm_cache_dtype).
    ssm_dtype: StateDtype = "model"
    mixer: ClassVar[str] = "mamba2"
    checkpoint_blocks: ClassVar[int] = 1  # MambaMixer2.get_kv_cache_spec

    def shapes(self) -> tuple[tuple[int, ...], ...]:
        groups = self.n_groups + (0 if self.n_groups % self.tp == 0 else self.tp - self.n_groups)
        conv_dim = self.intermediate + 2 * groups * self.state_size
        return (
            _conv(_divide(conv_dim, self.tp), self.window(self.conv_kernel)),
            (_divide(self.num_heads, self.tp), self.head_dim, self.state_size),
        )

    def dtypes(self) -> tuple[StateDtype, ...]:
        return ("model", self.recurrent(self.ssm_dtype))

    def tp_divisors(self) -> tuple[tuple[str, int], ...]:
        return (("mamba_n_heads", self.num_heads), ("mamba intermediate size", self.intermediate))


@dataclass(frozen=True, slots=True)
class GatedDeltaNetSpec(StateSpec):
    """Gated delta net (Qwen3-Next, Qwen3.5): conv (kernel − 1 + spec, (2·k_heads·k_dim +
    v_heads·v_dim) / tp), recurrent (v_heads / tp, v_dim, k_dim)."""

    num_k_heads: int = 0
    num_v_heads: int = 0
    head_k_dim: int = 0
    head_v_dim: int = 0
    conv_kernel: int = 4
    # Qwen3.5: the config's mamba_ssm_dtype (float32), else the model's dtype.
    ssm_dtype: StateDtype = "model"
    mixer: ClassVar[str] = "gdn"

    def shapes(self) -> tuple[tuple[int, ...], ...]:
        conv_dim = 2 * self.head_k_dim * self.num_k_heads + self.head_v_dim * self.num_v_heads
        return (
            _conv(_divide(conv_dim, self.tp), self.window(self.conv_kernel)),
            (_divide(self.num_v_heads, self.tp), self.head_v_dim, self.head_k_dim),
        )

    def dtypes(self) -> tuple[StateDtype, ...]:
        # gated_delta_net_state_dtype: conv in the model's dtype, recurrent in the SSM dtype.
        return ("model", self.recurrent(self.ssm_dtype))

    def tp_divisors(self) -> tuple[tuple[str, int], ...]:
        return (
            ("linear_num_key_heads", self.num_k_heads),
            ("linear_num_value_heads", self.num_v_heads),
        )


@dataclass(frozen=True, slots=True)
class KimiDeltaSpec(StateSpec):
    """Kimi delta attention (Kimi-Linear): conv (kernel − 1 + spec, 3·heads·head_dim / tp),
    recurrent (heads / tp, head_dim, head_dim) in fp32 (kda_state_dtype)."""

    num_heads: int = 0
    head_dim: int = 0
    conv_kernel: int = 4
    mixer: ClassVar[str] = "kda"

    def shapes(self) -> tuple[tuple[int, ...], ...]:
        conv_dim = 3 * self.num_heads * self.head_dim
        return (
            _conv(_divide(conv_dim, self.tp), self.window(self.conv_kernel)),
            (_divide(self.num_heads, self.tp), self.head_dim, self.head_dim),
        )

    def dtypes(self) -> tuple[StateDtype, ...]:
        return ("model", "fp32")

    def tp_divisors(self) -> tuple[tuple[str, int], ...]:
        return (("linear_attn_config.num_heads", self.num_heads),)


@dataclass(frozen=True, slots=True)
class ShortConvSpec(StateSpec):
    """Short convolution (LFM2): one conv state (conv_L_cache − 1 + spec, conv_dim / tp)."""

    channels: int = 0
    conv_kernel: int = 3
    mixer: ClassVar[str] = "short_conv"

    def shapes(self) -> tuple[tuple[int, ...], ...]:
        return (
            _conv(
                _divide(self.channels, self.tp),
                self.window(self.conv_kernel),
            ),
        )

    def dtypes(self) -> tuple[StateDtype, ...]:
        return ("model",)

    def tp_divisors(self) -> tuple[tuple[str, int], ...]:
        return (("conv_dim", self.channels),)


@dataclass(frozen=True, slots=True)
class LinearAttentionSpec(StateSpec):
    """Lightning linear attention (MiniMax-Text-01): one state (heads / tp, head_dim,
    head_dim) (linear_attention_state_shape)."""

    num_heads: int = 0
    head_dim: int = 0
    mixer: ClassVar[str] = "linear_attention"

    def shapes(self) -> tuple[tuple[int, ...], ...]:
        return ((self.num_heads // self.tp, self.head_dim, self.head_dim),)

    def dtypes(self) -> tuple[StateDtype, ...]:
        return ("model",)

    def tp_divisors(self) -> tuple[tuple[str, int], ...]:
        return (("num_attention_heads", self.num_heads),)


def state_specs(layers: tuple[LayerSpec, ...]) -> list[StateSpec]:
    return [s for s in layers if isinstance(s, StateSpec)]


__all__ = [
    "GatedDeltaNetSpec",
    "KimiDeltaSpec",
    "LinearAttentionSpec",
    "Mamba1Spec",
    "Mamba2Spec",
    "ShortConvSpec",
    "StateDtype",
    "StateSpec",
    "state_specs",
]
