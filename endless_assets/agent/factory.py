"""Pick the solver stage's policy the settings ask for."""

from __future__ import annotations

from collections.abc import Callable

from endless_assets.agent.policies import NoopPolicy, OraclePolicy, Policy
from endless_assets.settings import Settings, SettingsError


def policy_factory(settings: Settings) -> Callable[[], Policy]:
    """A factory, because every episode needs its own policy state."""
    if settings.solver.policy == "oracle":
        return OraclePolicy
    if settings.solver.policy == "noop":
        return NoopPolicy
    if settings.solver.policy == "chat":
        from endless_assets.agent.chat import ChatPolicy

        return ChatPolicy.factory_from_settings(settings)
    raise SettingsError(f"unknown solver {settings.solver.policy!r}")
