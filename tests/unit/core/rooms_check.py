#!/usr/bin/env python3
"""src/core's rooms, from the bottom up: util, model, schedule, cost, projection, output. A room includes only rooms
below it (and itself); the check fails naming every include that reaches up, and any source file that sits in no room.
Usage: rooms_check.py SRC_DIR"""
import os
import re
import sys

ROOMS = ["util", "model", "schedule", "cost", "projection", "output"]
core = os.path.join(sys.argv[1], "core")
include = re.compile(r'^\s*#\s*include\s+"core/([^/"]+)/')
problems = []
files = 0
for dirpath, _, names in os.walk(core):
    for name in sorted(names):
        if not name.endswith((".h", ".cpp")):
            continue
        path = os.path.join(dirpath, name)
        rel = os.path.relpath(path, core)
        room = rel.split(os.sep)[0]
        if room not in ROOMS:
            problems.append(f"src/core/{rel}: in no room (rooms: {', '.join(ROOMS)})")
            continue
        files += 1
        with open(path, encoding="utf-8") as f:
            for line_no, line in enumerate(f, 1):
                m = include.match(line)
                if not m:
                    continue
                target = m.group(1)
                if target not in ROOMS:
                    problems.append(f"src/core/{rel}:{line_no}: includes core/{target}/, which is no room")
                elif ROOMS.index(target) > ROOMS.index(room):
                    problems.append(f"src/core/{rel}:{line_no}: the {room} room includes core/{target}/, a room above "
                                    f"it (order: {' < '.join(ROOMS)})")
if files == 0:
    problems.append(f"no source files under {core}")
if problems:
    print("\n".join(problems))
    sys.exit(1)
print(f"{files} files in {len(ROOMS)} rooms; no room includes one above it")
