"""The LLM generator (the describe, build and validation stages through any OpenAI-compatible
endpoint); see `generator.py`."""

from endless_assets.generation.llm.generator import LLMGenerator

__all__ = ["LLMGenerator"]
