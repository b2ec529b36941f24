"""Task containers: their start, identity and limits, the persistent shell, warm spares, snapshots
and changes."""
