import sys

from calc import add

if add(2, 3) != 5:
    print(f"FAIL: add(2, 3) returned {add(2, 3)}, expected 5")
    sys.exit(1)
print("ok: add(2, 3) == 5")
