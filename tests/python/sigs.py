"""sigs.py: the ctypes signatures of python/eager_sgd/_lib.py against python/csrc/eager_py.c's
definitions: every eg_* function the package declares exists in C with as many parameters, void
exactly where the binding's restype is None, a pointer parameter exactly where the binding's is a
pointer or string. No library is loaded (no MPI, no GPU). Exit 1 with one line per mismatch."""
import ast
import os
import re
import sys

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
src = open(os.path.join(root, "python", "csrc", "eager_py.c")).read()
c = {}
for m in re.finditer(r"^([A-Za-z_][\w \t]*?[\s*]+)(eg_\w+)\(([^)]*)\)\s*\{", src, re.M):
    ret, name, args = m.group(1).strip(), m.group(2), m.group(3).strip()
    if ret.startswith("static"):
        continue
    params = [] if args in ("", "void") else [a.strip() for a in args.split(",")]
    c[name] = (ret, [("*" in a or "[" in a) for a in params])
# the binding's table: sig = {"name": (RES, [ARGS]), ...} in _lib.load, read without loading the library
tree = ast.parse(open(os.path.join(root, "python", "eager_sgd", "_lib.py")).read())
table = next(n.value for n in ast.walk(tree) if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "sig")
PTR = {"P", "C", "DP"}  # c_void_p, c_char_p, POINTER(c_double); ctypes.POINTER(...) calls too
bad = []
for k, v in zip(table.keys, table.values):
    name, (res, args) = k.value, v.elts
    if name not in c:
        bad.append("%s: declared in _lib.py, not defined in eager_py.c" % name)
        continue
    ret, cptr = c[name]
    py = [isinstance(a, ast.Call) or getattr(a, "id", "") in PTR for a in args.elts]
    if len(py) != len(cptr):
        bad.append("%s: %d parameters in _lib.py, %d in eager_py.c" % (name, len(py), len(cptr)))
    elif py != cptr:
        bad.append("%s: pointer parameters %s in _lib.py, %s in eager_py.c" % (name, py, cptr))
    if (getattr(res, "value", 0) is None) != (ret == "void"):
        bad.append("%s: restype %s in _lib.py, returns '%s' in eager_py.c" % (name, ast.unparse(res), ret))
for line in bad:
    print("sigs.py: " + line)
if bad:
    sys.exit(1)
print("sigs.py: %d functions of _lib.py match eager_py.c (%d defined there)" % (len(table.keys), len(c)))
