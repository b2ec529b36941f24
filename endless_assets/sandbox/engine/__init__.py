"""The engines: Docker or Podman clients, the engine pool, retries of work an engine broke,
leftovers of dead processes, disk budgets."""
