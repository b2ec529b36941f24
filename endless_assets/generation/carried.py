"""Tasks that arrive complete (imported, or procedural): later stages only validate them."""

from typing import Any

from endless_assets.generation import Environment, GenerationError, Usage
from endless_assets.models import Task
from endless_assets.settings import Settings


class CarriedGenerator:
    """Hands back the environment and tests the draft already carries; cannot repair."""

    name = "carried"
    model = ""
    repair_rounds = 1
    reference_required = True
    needs_build_network = True  # but imported builds are offline unless build_network is set
    dedupe_threshold = None
    version = ""
    cell_kind = ""  # carried tasks arrive whole: nothing to draw

    def parallelism(self, settings: Settings) -> int:
        return settings.run.workers

    def run_metadata(self) -> dict[str, Any]:
        return {}

    def describe(self, batch: str, index: int, seed: int) -> tuple[Task, Usage]:
        raise GenerationError("carried tasks are imported, not described")

    def cells(self) -> list[tuple[str, Any]]:
        return []

    def describe_cell(
        self, batch: str, index: int, seed: int, name: str, grade: Any
    ) -> tuple[Task, Usage]:
        raise GenerationError("carried tasks are imported, not drawn by cell")

    def describe_variant(
        self, batch: str, index: int, seed: int, name: str, grade: Any, parent: Task
    ) -> tuple[Task, Usage]:
        raise GenerationError("carried tasks are imported, not drawn by cell")

    def write_environment(
        self, draft: Task, feedback: str | None, previous: Environment | None
    ) -> tuple[Environment, Usage]:
        if draft.dockerfile is None or draft.initial_test is None:
            raise GenerationError("the task carries no environment (Dockerfile, initial test)")
        return Environment(draft.dockerfile, dict(draft.context_files), draft.initial_test), Usage()

    def write_completion_test(
        self, draft: Task, feedback: str | None, previous: str | None
    ) -> tuple[str, Usage]:
        if draft.completion_test is None:
            raise GenerationError("the task carries no completion test")
        return draft.completion_test, Usage()
