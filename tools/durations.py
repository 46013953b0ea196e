"""Write tests/durations.json, each test file's seconds, from the JUnit XML reports of a run
(`make durations`). tests/conftest.py hands the files to the workers longest first, so the run does
not end waiting on one long file started last; the figures only order the files, never select them."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "tests" / "durations.json"


def main(reports: list[str]) -> None:
    measured: Counter[str] = Counter()
    for report in reports:
        for case in ET.parse(report).iter("testcase"):
            parts = case.get("classname", "").split(".")  # tests.<dir>.test_<file>[.<Class>]
            module = next(i for i, part in enumerate(parts) if part.startswith("test_"))
            measured["/".join(parts[: module + 1]) + ".py"] += float(case.get("time", 0))
    # Files this run did not measure keep their figure.
    seconds = {**(json.loads(OUT.read_text()) if OUT.exists() else {}),
               **{path: round(total, 1) for path, total in measured.items()}}
    OUT.write_text(json.dumps(dict(sorted(seconds.items())), indent=0) + "\n")
    print(f"{OUT}: {len(measured)} files measured")


if __name__ == "__main__":
    main(sys.argv[1:])
