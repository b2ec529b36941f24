"""The soundness stage: repeated controls, shortcut and ablation probes, and the model probes
(alignment audit, cheat rollout)."""
