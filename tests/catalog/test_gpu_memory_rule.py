"""One rule for a GPU's memory (issue 25): torch's total as vLLM sees it, each entry saying where
its figure comes from (`memory_basis`), every figure checked against that source."""

from __future__ import annotations

import json
from pathlib import Path

from planner.catalog import get_gpu, list_gpus

GiB = 1 << 30
MiB = 1 << 20
ROOT = Path(__file__).resolve().parents[2]
# nvidia-smi totals published by modal-labs/modal-client PR #2797 (research hardware table [M]).
NVIDIA_SMI_MIB = {
    "A100-SXM-40GB": 40_960,
    "A100-SXM-80GB": 81_920,
    "A100-PCIe-80GB": 81_920,
    "A10-24GB": 23_028,
    "L4-24GB": 23_034,
}


def logged_totals() -> dict[str, float]:
    """GPU name → the torch total vLLM printed, from the start-up logs in the fixtures."""
    out: dict[str, float] = {}
    for line in (ROOT / "tests/fixtures/budget_logs.jsonl").read_text().splitlines():
        gpu = json.loads(line).get("gpu") or {}
        if gpu.get("total_memory_gib") and "not printed" not in str(gpu.get("memory_evidence")):
            out[str(gpu["name"])] = float(gpu["total_memory_gib"])
    return out


def test_every_gpu_states_its_memory_basis() -> None:
    bases = {g.id: g.memory_basis for g in list_gpus()}
    assert set(bases.values()) <= {"vllm_log", "nvidia_smi", "same_memory", "vendor"}
    assert bases["H100-SXM-80GB"] == bases["L40S-48GB"] == "vllm_log"


def test_vllm_log_figures_are_the_logged_totals() -> None:
    logged = logged_totals()
    h100 = next(v for k, v in logged.items() if "H100" in k)
    assert abs(get_gpu("H100-SXM-80GB").usable_memory_bytes / GiB - h100) < 0.006
    # The L40S's figure: vllm#15815 "total_gpu_memory (44.42GiB)", quoted in the L40S record.
    l40s_record = next(
        json.loads(x)
        for x in (ROOT / "tests/fixtures/budget_logs.jsonl").read_text().splitlines()
        if "l40s" in json.loads(x)["id"]
    )
    assert "44.42" in l40s_record["gpu"]["memory_evidence"]
    assert abs(get_gpu("L40S-48GB").usable_memory_bytes / GiB - 44.42) < 0.006


def test_nvidia_smi_figures_are_the_published_totals() -> None:
    for gpu_id, mib in NVIDIA_SMI_MIB.items():
        g = get_gpu(gpu_id)
        assert g.memory_basis == "nvidia_smi"
        assert abs(g.usable_memory_bytes - mib * MiB) < MiB, gpu_id


def test_the_l40_and_l40s_boards_plan_with_the_same_memory() -> None:
    # Same AD102 board, same 48 GB GDDR6 with ECC: one memory figure, the one a log printed.
    assert get_gpu("L40-48GB").usable_memory_bytes == get_gpu("L40S-48GB").usable_memory_bytes
    assert get_gpu("L40-48GB").memory_basis == "same_memory"


def test_the_rule_is_written_down() -> None:
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "**GPU memory: one rule.**" in readme and "`memory_basis`" in readme
