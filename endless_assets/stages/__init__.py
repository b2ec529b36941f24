"""The pipeline's stages as plain functions over one task each (no Dagster here): each outcome is
one table row; a rejected task keeps its row with a `status` and a `reject_reason`."""
