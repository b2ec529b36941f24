"""The one partitions definition every per-task asset shares: daily batches.

They start at the instance's first batch (batch_calendar.py: the day `endless run` recorded in
DAGSTER_HOME, else 2026-01-01), so the UI's "% filled" counts the days since the project began.
`end_offset=1` makes today's batch runnable today (the default would stop at yesterday). The batch
key seeds everything random in it.
"""

import dagster as dg

from endless_assets.batch_calendar import FLOOR, first_batch_day

BATCH_START = FLOOR  # the earliest day any batch may be

batches = dg.DailyPartitionsDefinition(start_date=first_batch_day(), end_offset=1)

# Batches brought in from elsewhere (`endless import ...`): named, not dated.
imported_batches = dg.DynamicPartitionsDefinition(name="imported_batches")
