"""endless: a Dagster platform that manufactures verified terminal tasks for RL on shell agents."""
