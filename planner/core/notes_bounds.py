"""Note templates of the decode bounds: the floor, the calibrated and the expected step, and
recommend's use of them (merged into `planner.core.notes.TEMPLATES`; codes are a contract)."""

from __future__ import annotations

BOUNDS_TEMPLATES: dict[str, str] = {
    "bounds.calibration_other_device": (
        "The calibration was measured on {measured_on}, but this plan is for {gpu}: its "
        "calibrated estimate describes the other device."
    ),
    "bounds.pipeline_sum": (
        "Pipeline parallel: one token passes every stage in turn, so the decode floor sums the "
        "stages' reads."
    ),
    "bounds.weights_unknown": "Weights size unknown: the decode floor counts KV reads only.",
    "bounds.moe_active_weights": (
        "Mixture of experts: a decode step of {batch:,} tokens reads the dense weights and the "
        "experts the batch touches, {experts:.1f} of {num_experts} per MoE layer (top-{top_k}; "
        "uniform routing assumed: E·(1 − (1 − k/E)^B), k at batch 1, E at large batches), "
        "{read_gib} of {total_gib} per step."
    ),
    "bounds.calibrated": (
        "Calibrated estimate from {device} (measured {measured_at}): {calls} attention calls × "
        "t0 + KV bytes / {decode_tbps}; the datasheet floor at {floor_tbps} stays the hard "
        "lower bound."
    ),
    "bounds.calibrated_terms": (
        "The calibration carries a validated model's step terms: {calls} layers × {per_layer_us} "
        "µs, and matmuls of {matmul_ms} ms at {tflops} TFLOP/s where they outlast the weight "
        "stream."
    ),
    "bounds.calibrated_layer_term": (
        "The calibration carries a validated model's step term: {calls} layers × {per_layer_us} "
        "µs (no matmul rate was fitted)."
    ),
    "bounds.expected": (
        "Expected decode step {expected_ms} ms (floor {floor_ms} ms): max(memory, compute) + "
        "all-reduce + fixed costs, from constants fitted on published measurements (constants: "
        "{source}); the floor stays the bound no run beats."
    ),
    "bounds.expected_no_link": (
        "No link figures for this GPU: tensor-parallel all-reduce assumed over PCIe 4.0 x16 "
        "({link_gbps} GB/s one way)."
    ),
    "bounds.expected_eager": (
        "enforce_eager: the fitted per-layer cost assumes CUDA graphs; without them every "
        "kernel is launched from the host, so a real step is slower than this estimate."
    ),
    "recommend.tpot_expected": (
        "The TPOT and throughput checks use the expected decode step (bounds.expected, fitted "
        "constants); a candidate whose bandwidth floor already misses a target is rejected."
    ),
}

__all__ = ["BOUNDS_TEMPLATES"]
