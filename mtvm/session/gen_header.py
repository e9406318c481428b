"""Regenerates c_runtime/include/mtvm_protocol.h from protocol_table.py:

    python -m mtvm.session.gen_header            # write the header
    python -m mtvm.session.gen_header --check    # exit 1 if it is stale
"""
import sys

from .protocol import HEADER_PATH, render_c_header


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    text = render_c_header()
    with open(HEADER_PATH) as f:
        current = f.read()
    if "--check" in argv:
        if current != text:
            print(f"{HEADER_PATH} is stale: run python -m mtvm.session.gen_header")
            return 1
        return 0
    if current != text:
        with open(HEADER_PATH, "w") as f:
            f.write(text)
    print(f"wrote {HEADER_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
