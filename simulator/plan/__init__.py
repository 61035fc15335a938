"""Capacity planning (`simulate plan`): the cheapest deployment that meets an SLO.

- `config`: the plan file (strict models) and the expansion of its search space.
- `search`: one configuration's maximum sustainable rate (the worker's task).
- `slo`: pass/fail of one simulated rate, and the live monitor that stops decided runs.
- `executor`: local processes or Ray, streaming records as they finish.
- `analysis`: replicas, cost, ranking and Pareto fronts from per-replica rates.
- `runner`: the sweep end to end: resume, verification of the winner, outputs.
- `report`, `cli`: plan.csv / plan.json / plan.html, and the command.

From Python: `load_plan(path)` (simulator.plan.config), then `run_plan(loaded, out_dir)`
(simulator.plan.runner). Nothing is imported here, so `simulate --help` stays fast.
"""
