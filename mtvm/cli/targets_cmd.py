"""`mtvm targets`: the targets the compiler knows (mtvm.target)."""
from __future__ import annotations


def add_parser(sub) -> None:
    p = sub.add_parser("targets", help="list the compile targets (--target NAME)")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..target import Target, host_target, target_names
    rows = [("target", "isa", "what the C uses")]
    for name in target_names():
        t = Target.parse(name)
        what = t.describe()
        if name == "host":
            what = f"this machine = {host_target().name}"
        rows.append((name, t.isa, what))
    width = [max(len(r[i]) for r in rows) for i in range(2)]
    for r in rows:
        print(f"{r[0]:<{width[0]}}  {r[1]:<{width[1]}}  {r[2]}")
    print("\nAdd or remove features with +NAME / +noNAME: x86-64-v4+avx512vnni, cortex-m4+nofp, "
          "cortex-m55+nomve.\nA board implies its target: mtvm compile MODEL --board mps2-an386.")
    return 0
