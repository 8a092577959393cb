"""The seeds' teaching lab: a NumPy reference decoder, a ring-buffer cache, counted multiplies.

Kept apart from `planner.core` (the sizing arithmetic): the lab runs tensors, the core never does.
"""
