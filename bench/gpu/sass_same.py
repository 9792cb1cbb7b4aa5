#!/usr/bin/env python3
"""Which kernels' sm_90 machine code a change left exactly as it was: every
kernel of the current tree against the same kernel at a commit, compared
instruction by instruction, encodings (control words included) and all.

    bench/gpu/sass_same.py 7b0f3c8     # exit 1 if a kernel there changed or is gone

Made for issue 57, where the float16 output became a template parameter of
every kernel family: the BF16 instantiations must compile to the code they
had (sass_budget.py's ratchet then measures the same kernels), the float16
ones (`ws_<name>_f16`) are new. Needs what sass_budget.py needs
(WEIGHTSTREAM_NVCC and cuobjdump beside it); about a minute on 2 cores.
"""
from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import sass_build  # noqa: E402

INSTRUCTION = re.compile(r"\s*/\*[0-9a-f]{4}\*/")  # /*0010*/ OPCODE ... ; /* encoding */
CONTROL = re.compile(r"\s*/\* 0x[0-9a-f]{16} \*/\s*$")  # the second encoding word


def functions(sass: str) -> dict[str, str]:
    """{kernel: its instructions and encodings}, whitespace collapsed
    (cuobjdump pads columns to the widest instruction in the file)."""
    out = {}
    for part in re.split(r"\n\s*Function : ", sass)[1:]:
        name, body = part.split("\n", 1)
        keep = (" ".join(line.split()) for line in body.splitlines() if INSTRUCTION.match(line) or CONTROL.match(line))
        out[name.strip()] = "\n".join(keep)
    return out


def main() -> int:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with tempfile.TemporaryDirectory(prefix="sass-same-") as tmp:
        sass_build.archive(sys.argv[1], Path(tmp))
        old = functions(sass_build.sass(Path(tmp)))
    new = functions(sass_build.sass(sass_build.ROOT))
    changed = sorted(f for f in old if f in new and new[f] != old[f])
    gone = sorted(set(old) - set(new))
    added = sorted(set(new) - set(old))
    print(f"sass_same: {len(old) - len(changed) - len(gone)}/{len(old)} kernels of {sys.argv[1]} unchanged; "
          f"changed {changed or 'none'}; gone {gone or 'none'}; {len(added)} new: {', '.join(added) or 'none'}")
    return 1 if changed or gone else 0


if __name__ == "__main__":
    sys.exit(main())
