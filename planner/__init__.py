"""kvplan: a KV-cache capacity planner for LLM inference."""

__version__ = "0.1.0"
