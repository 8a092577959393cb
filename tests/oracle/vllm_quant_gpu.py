"""vLLM's own quantization minimums, run in a release's oracle virtualenv: the oracle for
tests/oracle/test_vllm_oracle_quant_gpu.py. Usage: `python vllm_quant_gpu.py IN.json OUT.json`;
IN is a list of `{"id": method}`, OUT has each method's `get_min_capability()` and whether
VllmConfig still refuses a device below it."""

from __future__ import annotations

import importlib.util
import inspect
import json
import logging
import sys


def main() -> None:
    logging.disable(logging.CRITICAL)
    import torch

    # torchvision over CPU torch (see vllm_sizing.py): declare the two ops it registers fake
    # kernels for, or transformers' import of it fails.
    if torch.version.cuda is None and importlib.util.find_spec("torchvision") is not None:
        lib = torch.library.Library("torchvision", "DEF")
        lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    import vllm
    import vllm.config as config_pkg
    from vllm.model_executor.layers.quantization import get_quantization_config

    try:  # 0.33 keeps VllmConfig in vllm/config/vllm.py; 0.11 in vllm/config/__init__.py
        from vllm.config import vllm as vllm_config
    except ImportError:
        vllm_config = config_pkg
    with open(sys.argv[1]) as f:
        cases = json.load(f)
    src = inspect.getsource(vllm_config)
    refuses = "capability < quant_config.get_min_capability()" in src
    results = [
        {
            "id": c["id"],
            "min_capability": get_quantization_config(c["id"]).get_min_capability(),
            "config_refuses_below": refuses,
        }
        for c in cases
    ]
    meta = {"vllm_version": vllm.__version__, "torch": torch.__version__}
    with open(sys.argv[2], "w") as f:
        json.dump({"meta": meta, "results": results}, f)


if __name__ == "__main__":
    main()
