"""The auto-tuner: search spaces from templates per kernel class, random / grid /
evolutionary search ranked by a learned cost model, isolated measurement of compiled
candidates, and a JSON-lines tuning log that compilation reuses (see docs/tuner.md)."""
