"""Reference semantics, below the passes and the backends: what every graph op computes
(`graph`: numpy kernels, `evaluate_op`, `run_reference`) and a direct evaluator of te/loop
IR (`te`) that lowerings are checked against. Passes use it to fold; backends are tested
against it; it imports only the dialects and the diagnostics."""
