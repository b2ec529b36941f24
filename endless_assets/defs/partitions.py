"""The one partitions definition every per-task asset shares: daily batches.

`end_offset=1` makes today's batch runnable today (the default would stop at yesterday). The batch
key seeds everything random in it.
"""

import dagster as dg

BATCH_START = "2026-01-01"

batches = dg.DailyPartitionsDefinition(start_date=BATCH_START, end_offset=1)

# Batches brought in from elsewhere (`endless import ...`): named, not dated.
imported_batches = dg.DynamicPartitionsDefinition(name="imported_batches")
