"""The pipeline's stages as plain functions over one task each (no Dagster here).

Each returns an outcome that becomes one table row; a rejected task keeps its row with a
`status` and a `reject_reason`. `SandboxError` (the engine failing) is caught and recorded as
`harness_error`, never as a rejection of the task, after the work it broke was tried again
`ENGINE_RETRIES` times.
"""

OK = "ok"
REJECTED = "rejected"
HARNESS_ERROR = "harness_error"
SKIPPED = "skipped"  # an earlier stage rejected the task
ENGINE_RETRIES = 2  # tries again of one task's work that a sandbox engine broke
