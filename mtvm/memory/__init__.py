from .planner import (GreedyPlanner, LinearPlanner, MemoryPlan, inplace_steps, order_peak,  # noqa: F401
                      plan_memory)
