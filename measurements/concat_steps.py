"""Join `simcli bench step` CSVs of one machine into one file for `simcli calibrate` (one step file per fit).

    python measurements/concat_steps.py OUT.csv IN1.csv IN2.csv ...

Every input's `#` comment lines are kept (each run's command and date), then one header (all inputs must
have the same columns) and every row. Refuses to overwrite OUT.csv.
"""

from __future__ import annotations

import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    out, ins = Path(argv[0]), argv[1:]
    if out.exists():
        print(f"{out} exists; remove it first", file=sys.stderr)
        return 2
    comments, rows, header = [], [], None
    for f in ins:
        body = [ln for ln in Path(f).read_text().splitlines(keepends=True)]
        comments += [ln for ln in body if ln.startswith("#")]
        data = [ln for ln in body if ln.strip() and not ln.startswith("#")]
        if header is None:
            header = data[0]
        elif data[0] != header:
            print(f"{f}: its columns differ from {ins[0]}'s", file=sys.stderr)
            return 2
        rows += data[1:]
    out.write_text("".join(comments) + header + "".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
