"""C identifiers from arbitrary ONNX names."""
import re


def sanitize(name: str) -> str:
    s = re.sub(r"\W", "_", name)
    return "_" + s if not s or s[0].isdigit() else s


def unique_names(names: list[str]) -> list[str]:
    """Sanitized and de-duplicated (a_b and a.b must not collide)."""
    out, seen = [], set()
    for n in names:
        base = s = sanitize(n)
        k = 1
        while s in seen:
            s = f"{base}_{k}"
            k += 1
        seen.add(s)
        out.append(s)
    return out
