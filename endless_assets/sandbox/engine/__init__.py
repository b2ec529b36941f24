"""The engines: clients and their Docker or Podman provider, the engine pool, retries of work
an engine broke, leftovers of dead processes, disk budgets."""
