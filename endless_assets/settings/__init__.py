"""Every setting, declared once in its group (run.py, sandbox.py, generator.py, solver.py,
checks.py, sampling.py): default, environment variable, meaning. Explicit values (Dagster
config, CLI flags) win over the environment, which wins over the default; secrets are never
settings."""

from endless_assets.settings.core import (
    BY_NAME,
    FIELDS,
    GROUPS,
    OPERATIONAL,
    Settings,
    settings_table,
)
from endless_assets.settings.declare import Field, SettingsError, setting

__all__ = [
    "BY_NAME",
    "FIELDS",
    "GROUPS",
    "OPERATIONAL",
    "Field",
    "Settings",
    "SettingsError",
    "setting",
    "settings_table",
]
