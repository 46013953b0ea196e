"""Run one `inspect eval` of a metaharness agent in this process, for a test that started us in a
loopback-only network namespace (`unshare -rnm … --in-namespace`): the vendor CLI, Inspect's model
proxy and Inspect all share `lo` and nothing else, so a vendor's phone-home has nowhere to go.

Usage: python inspect_child.py CONFIG.json [--in-namespace]
CONFIG: {"harness", "frame_ops" or "policy" (+ "policy_mode"), "calls": [[name, arguments], …], "work",
"logs", "vendor_dir"}.
Prints the log's location as its last line.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from inspect_support import COMMAND, frame, run_eval  # noqa: E402

from metaharness.inspect import metaharness_agent  # noqa: E402


def main() -> None:
    config = json.loads(pathlib.Path(sys.argv[1]).read_text())
    if "--in-namespace" in sys.argv:
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    decider = ({"frame": frame(config["frame_ops"])} if "frame_ops" in config
               else {"policy": config["policy"], "policy_mode": config.get("policy_mode")})
    agent = metaharness_agent(config["harness"], cwd=config["work"], command=COMMAND, vendor_dir=config["vendor_dir"],
                              **decider)
    log = run_eval(agent, [tuple(c) for c in config["calls"]], pathlib.Path(config["logs"]))
    print(log.location)


if __name__ == "__main__":
    main()
