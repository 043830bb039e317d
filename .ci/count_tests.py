"""Print 'tests: N passed, N failed, N skipped' from the JUnit XML reports Pants wrote."""

import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

passed = failed = skipped = 0
for report in Path(sys.argv[1]).glob("**/*.xml"):
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
        elif case.find("skipped") is not None:
            skipped += 1
        else:
            passed += 1
print(f"tests: {passed} passed, {failed} failed, {skipped} skipped")
