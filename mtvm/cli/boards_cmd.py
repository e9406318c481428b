"""`mtvm boards`: the boards in boards/ as a table, or one board's data."""
from __future__ import annotations

import json


def add_parser(sub):
    p = sub.add_parser("boards", help="list the boards (cpu, fpu/dsp, flash, RAM, how it flashes)",
                       description="List the boards defined in boards/*.json.")
    p.add_argument("name", nargs="?", help="show this board's full data file")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    from ..boards import board_table, list_boards, load_board
    if args.name:
        b = load_board(args.name)
        if args.json:
            print(json.dumps(b.to_dict(), indent=2))
            return 0
        print(f"{b.name}: {b.description}")
        print(f"  file:     {b.path}")
        if b.template in ("cortex_m", "riscv"):
            print(f"  cpu:      {b.cpu}  fpu={b.fpu or 'no'}  dsp={'yes' if b.dsp else 'no'}"
                  f"  mve={'yes' if b.mve else 'no'}  {b.clock_hz / 1e6:g} MHz")
            print(f"  cflags:   {' '.join(b.cflags)}")
            print(f"  flash:    0x{b.flash.origin:08x} + {b.flash.size} ({b.flash.name})")
            print(f"  RAM:      0x{b.ram.origin:08x} + {b.ram.size} ({b.ram.name})")
            u = b.uart
            print(f"  uart:     {u.get('driver')} @ {u.get('base')}  irq {u.get('rx_irq')}"
                  f"  {u.get('baud', 115200)} baud")
            print(f"  timer:    {b.timer}")
            print(f"  flash by: {b.flashes_with}")
            if b.usb:
                u = b.usb
                print(f"  usb:      {u.get('vid')}:{u.get('pid')} {u.get('product', '')}")
        if b.notes:
            print(f"  notes:    {b.notes}")
        return 0
    if args.json:
        print(json.dumps({n: load_board(n).to_dict() for n in list_boards()}, indent=2))
        return 0
    print(board_table())
    return 0
