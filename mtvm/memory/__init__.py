from .planner import (GreedyPlanner, LinearPlanner, MemoryPlan, Pool, inplace_steps,  # noqa: F401
                      order_peak, split_pools,
                      plan_memory)
