"""Pick the generator the settings ask for, and how many tasks a stage runs at once with it."""

from __future__ import annotations

from endless_assets.generation import TaskGenerator
from endless_assets.generation.procedural import ProceduralGenerator
from endless_assets.settings import Settings, SettingsError


def make_generator(settings: Settings, base_image: str) -> TaskGenerator:
    if settings.generator.kind == "procedural":
        return ProceduralGenerator(base_image)
    if settings.generator.kind == "llm":
        from endless_assets.generation.llm import LLMGenerator

        return LLMGenerator.from_settings(settings, base_image)
    raise SettingsError(f"unknown generator {settings.generator.kind!r}")


def task_parallelism(generator: TaskGenerator, settings: Settings) -> int:
    """Tasks a stage works on at once. A generator that waits on a model asks for more than
    `workers` (its `parallelism`), so requests overlap; Docker work stays bounded by
    the sandbox's CPU slots (`Sandbox.cpu`)."""
    return max(1, generator.parallelism(settings))
