"""Resources: the pipeline settings and the Docker sandbox, configurable from the UI.

Every field left unset (None) falls back to its environment variable, then its default, at run
time (settings.py). The launchpad shows these fields under `resources`.
"""

import dagster as dg

from endless_assets.lake import Lake
from endless_assets.sandbox.container import Limits
from endless_assets.sandbox.sandbox import Sandbox, SandboxConfig
from endless_assets.settings import Settings


class PipelineSettings(dg.ConfigurableResource):
    """Batch size, seeds, parallelism, generator and solver. Unset fields use ENDLESS_* vars."""

    data_dir: str | None = None
    tasks: int | None = None
    seed: int | None = None
    workers: int | None = None
    generator: str | None = None
    generator_model: str | None = None
    solver: str | None = None
    solver_model: str | None = None
    k: int | None = None
    max_turns: int | None = None
    command_timeout: float | None = None
    episode_seconds: float | None = None
    output_cap: int | None = None
    docker_host: str | None = None
    memory: str | None = None
    cpus: float | None = None
    pids: int | None = None
    disk: str | None = None
    build_network: bool | None = None
    generator_base_url: str | None = None
    task_temperature: float | None = None
    test_temperature: float | None = None
    max_tokens: int | None = None
    repair_rounds: int | None = None
    llm_concurrency: int | None = None
    llm_timeout: float | None = None
    llm_retries: int | None = None
    llm_cache: bool | None = None
    llm_backoff: float | None = None
    dedupe_threshold: float | None = None
    solver_base_url: str | None = None
    solver_temperature: float | None = None
    turn_tokens: int | None = None
    context_tokens: int | None = None
    rollout_workers: int | None = None
    min_pass_rate: float | None = None
    max_pass_rate: float | None = None

    def resolve(self) -> Settings:
        explicit = {name: getattr(self, name) for name in Settings.__dataclass_fields__}
        return Settings.resolve(**explicit)

    def lake(self) -> Lake:
        return Lake(self.resolve().data_dir)

    def sandbox(self) -> Sandbox:
        s = self.resolve()
        return Sandbox(
            SandboxConfig(
                docker_host=s.docker_host or None,
                limits=Limits(memory=s.memory, cpus=s.cpus, pids=s.pids, disk=s.disk),
                build_network=s.build_network,
            )
        )
