#!/usr/bin/env python3
"""Checks that every target's imports and its dependencies in Package.swift agree (run by .ci/run).

    python3 scripts/check-dependencies.py

A module imported but not declared (it compiles only because another dependency happens to bring it along) and a
dependency declared but imported nowhere are both reported; the exit status is 1 when there is either.
MemberImportVisibility makes each file import what it uses; this keeps Package.swift honest about it.
"""
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SYSTEM = {"Foundation", "FoundationEssentials", "Testing", "XCTest", "Synchronization", "Dispatch", "Glibc", "Musl",
          "Darwin"}

package = json.loads(subprocess.check_output(["swift", "package", "dump-package"], cwd=ROOT,
                                             stderr=subprocess.DEVNULL))
problems = 0
for target in package["targets"]:
    declared = set()
    for dependency in target["dependencies"]:
        for kind in ("byName", "product", "target"):
            if kind in dependency:
                declared.add(dependency[kind][0].replace("-", "_"))
    folder = target.get("path") or (("Tests/" if target["type"] == "test" else "Sources/") + target["name"])
    imported = set()
    for directory, _, files in os.walk(os.path.join(ROOT, folder)):
        for name in files:
            if name.endswith(".swift"):
                with open(os.path.join(directory, name)) as source:
                    for line in source:
                        # Swift modules are capitalised, but for executables under test (`@testable import
                        # push_sender`); this skips `import sys` in Python held by a Swift string.
                        match = re.match(r"^\s*(@testable )?(?:@_spi\(\w+\) )?(?:public |package |internal )?import (\w+)\s*$", line)
                        if match and (match.group(1) or match.group(2).lstrip("_")[:1].isupper()):
                            imported.add(match.group(2))
    undeclared = sorted(imported - SYSTEM - declared)
    unused = sorted(declared - imported)
    if undeclared or unused:
        problems += 1
        print("%s: imported but not declared %s; declared but not imported %s" % (target["name"], undeclared, unused))
if problems:
    sys.exit(1)
print("imports and Package.swift dependencies agree for %d targets" % len(package["targets"]))
