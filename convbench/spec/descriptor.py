"""oneDNN benchdnn's conv descriptor grammar: parse, format and read batch files.

Canonical form ``gXmbX_icXihXiwX_ocXohXowX_khXkwX_shXswX_phXpwX_dhXdwX_nNAME`` with
benchdnn's implicit rules: ``g1``, ``mb2``, stride 1, dilation 0 (none); width values
copy the height ones when omitted (square form); an omitted output is computed; an
omitted padding is computed from a given output, else 0. ``_`` separators are ignored.
Only 2-D convolutions are supported (``id``/``kd``/``od`` are rejected).
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

from convbench.errors import ConvbenchError
from convbench.spec.limits import MAX_DIMENSION, shown
from convbench.spec.problem import ConvProblem, ProblemError, output_size

BENCHDNN_DEFAULT_MB = 2
_KEYS = ("mb", "g", "ic", "id", "ih", "iw", "oc", "od", "oh", "ow", "kd", "kh", "kw",
         "sd", "sh", "sw", "pd", "ph", "pw", "dd", "dh", "dw")
# Longest keys first is not needed: every key is two letters except g.
_TOKEN = re.compile(r"(mb|g|ic|id|ih|iw|oc|od|oh|ow|kd|kh|kw|sd|sh|sw|pd|ph|pw|dd|dh|dw)(\d+)")


class DescriptorError(ConvbenchError):
    """A descriptor string that does not follow benchdnn's grammar."""


def _pad_for_output(o: int, i: int, k: int, s: int, d: int) -> int:
    return max(0, ((o - 1) * s - i + ((k - 1) * (d + 1) + 1)) // 2)


def parse_descriptor(text: str) -> ConvProblem:
    """Parse a benchdnn conv descriptor such as ``mb1ic64ih56oc64oh56kh3ph1n"res2a"``."""
    s = text.strip()
    if not s:
        raise DescriptorError("empty descriptor")
    quoted = shown(text)   # the descriptor as messages echo it: bounded, on one line
    values: dict[str, int] = {}
    name = ""
    pos = 0
    while pos < len(s):
        if s[pos] == "_":
            pos += 1
            continue
        m = _TOKEN.match(s, pos)
        if m:
            key = m.group(1)
            if key in values:
                raise DescriptorError(f"{quoted}: '{key}' given twice")
            digits = m.group(2).lstrip("0") or "0"
            if len(digits) > len(str(MAX_DIMENSION)) or int(digits) > MAX_DIMENSION:
                more = "..." if len(digits) > 12 else ""
                raise DescriptorError(f"{quoted}: {key}{digits[:12]}{more} is larger than "
                                      f"{MAX_DIMENSION} (2^31 - 1)")
            values[key] = int(digits)
            pos = m.end()
            continue
        if s[pos] == "n":
            name = s[pos + 1:].strip()
            if len(name) >= 2 and name[0] == name[-1] and name[0] in "\"'":
                name = name[1:-1]
            break
        raise DescriptorError(
            f"{quoted}: unexpected text at character {pos + 1}: {s[pos:pos + 12]!r} "
            f"(expected one of {', '.join(_KEYS)} followed by a number, or n<name>)")
    for key in ("id", "od", "kd", "sd", "pd", "dd"):
        if key in values:
            raise DescriptorError(f"{quoted}: 3-D convolutions ('{key}') are not supported")
    for key in ("ic", "oc"):
        if not values.get(key):
            raise DescriptorError(f"{quoted}: '{key}' is required and must be positive")
    has_h = any(k in values for k in ("ih", "kh", "oh", "dh", "sh", "ph"))
    has_w = any(k in values for k in ("iw", "kw", "ow", "dw", "sw", "pw"))
    if not has_h and not has_w:
        raise DescriptorError(f"{quoted}: no spatial size (ih/iw) and kernel (kh/kw) given")
    axes = {}
    for axis, present in (("h", has_h), ("w", has_w)):
        if not present:
            continue
        i, k = values.get("i" + axis, 0), values.get("k" + axis, 0)
        if not i or not k:
            raise DescriptorError(f"{quoted}: 'i{axis}' and 'k{axis}' are required")
        st, d = values.get("s" + axis, 1), values.get("d" + axis, 0)
        if st <= 0:
            raise DescriptorError(f"{quoted}: 's{axis}' must be positive")
        o, p = values.get("o" + axis), values.get("p" + axis)
        if o is None:
            p = 0 if p is None else p
            o = output_size(i, k, st, p, d)
        elif p is None:
            p = _pad_for_output(o, i, k, st, d)
        axes[axis] = {"i": i, "k": k, "s": st, "p": p, "d": d, "o": o}
    if "w" not in axes:  # square form: width copies height
        axes["w"] = dict(axes["h"])
    if "h" not in axes:  # 1-D problem written in w only: h is a unit axis
        axes["h"] = {"i": 1, "k": 1, "s": 1, "p": 0, "d": 0, "o": 1}
    fields = {"mb": values.get("mb", BENCHDNN_DEFAULT_MB), "g": values.get("g", 1),
              "ic": values["ic"], "oc": values["oc"], "name": name}
    for axis, a in axes.items():
        for letter in "ikspdo":
            fields[letter + axis] = a[letter]
    try:
        return ConvProblem(**fields)
    except ProblemError as exc:
        raise DescriptorError(f"{quoted}: {exc}") from None


def format_descriptor(p: ConvProblem, canonical: bool = False) -> str:
    """Print ``p`` in benchdnn's short form (or the canonical one); parse() inverts it."""
    square = (p.ih, p.kh, p.oh, p.sh, p.ph, p.dh) == (p.iw, p.kw, p.ow, p.sw, p.pw, p.dw)
    both = canonical or not square

    def spatial(h: str, hv: int, w: str, wv: int) -> str:
        return f"{h}{hv}{w}{wv}" if both else f"{h}{hv}"

    out = []
    if canonical or p.g != 1:
        out.append(f"g{p.g}")
    if canonical or p.mb != BENCHDNN_DEFAULT_MB:
        out.append(f"mb{p.mb}")
    out.append(f"ic{p.ic}" + spatial("ih", p.ih, "iw", p.iw))
    out.append(f"oc{p.oc}" + spatial("oh", p.oh, "ow", p.ow))
    out.append(spatial("kh", p.kh, "kw", p.kw))
    if canonical or p.sh != 1 or p.sw != 1:
        out.append(spatial("sh", p.sh, "sw", p.sw))
    out.append(spatial("ph", p.ph, "pw", p.pw))
    if canonical or p.dh or p.dw:
        out.append(spatial("dh", p.dh, "dw", p.dw))
    text = ("_" if canonical else "").join(out)
    if p.name:
        text += f'n"{p.name}"'
    return text


def read_batch_file(path: str | Path) -> list[ConvProblem]:
    """Read a benchdnn shapes/batch file: one descriptor a line, ``#`` comments.

    Option lines (``--dir=FWD_B``, ``--batch=...``) are skipped with a warning naming the line.
    """
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise DescriptorError(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise DescriptorError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    problems = []
    for lineno, raw in enumerate(lines, 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("-"):
            warnings.warn(f"{path}:{lineno}: skipping option line {line!r}", stacklevel=2)
            continue
        for word in line.split():
            try:
                problems.append(parse_descriptor(word))
            except DescriptorError as exc:
                raise DescriptorError(f"{path}:{lineno}: {exc}") from None
    return problems
