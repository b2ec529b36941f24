"""The pipeline's stages as plain functions over one task each (no Dagster here).

Each returns an outcome that becomes one table row; a rejected task keeps its row with a
`status` and a `reject_reason`. `SandboxError` (the engine failing) is caught and recorded as
`harness_error`, never as a rejection of the task, after the work it broke was tried again
`ENGINE_RETRIES` times (runner.py).
"""

from endless_assets.models import HARNESS_ERROR, OK, REJECTED, SKIPPED

ENGINE_RETRIES = 2  # (runner.py) kept here until the re-layout rewrites its importers

__all__ = ["ENGINE_RETRIES", "HARNESS_ERROR", "OK", "REJECTED", "SKIPPED"]
