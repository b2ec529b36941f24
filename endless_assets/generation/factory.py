"""Pick the generator the settings ask for."""

from __future__ import annotations

from endless_assets.generation import TaskGenerator
from endless_assets.generation.procedural import ProceduralGenerator
from endless_assets.settings import Settings, SettingsError


def make_generator(settings: Settings, base_image: str) -> TaskGenerator:
    if settings.generator == "procedural":
        return ProceduralGenerator(base_image)
    if settings.generator == "llm":
        from endless_assets.generation.llm import LLMGenerator

        return LLMGenerator.from_settings(settings, base_image)
    raise SettingsError(f"unknown generator {settings.generator!r}")
