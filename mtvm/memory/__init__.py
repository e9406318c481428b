from .planner import GreedyPlanner, LinearPlanner, MemoryPlan, inplace_steps, plan_memory  # noqa: F401
