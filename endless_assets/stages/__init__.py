"""The pipeline's stages as plain functions over one task each (no Dagster here).

Each returns an outcome that becomes one table row; a rejected task keeps its row with a
`status` (models.py) and a `reject_reason`. runner.py runs a stage's items: in parallel, retried
after an engine failure, journaled so a rerun resumes.
"""
