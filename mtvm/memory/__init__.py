from .planner import GreedyPlanner, LinearPlanner, MemoryPlan, plan_memory  # noqa: F401
