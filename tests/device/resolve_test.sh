#!/bin/bash
# resolve_test.sh: resolve_libraries (tests/device/steps.sh), which the device checks run before
# anything else, finds a library the loader cannot (here: one built into a folder of its own,
# named by RESOLVE_DIRS as pip's nvidia/*/lib would be found) and exports LD_LIBRARY_PATH so that
# the binary resolves and runs.
set -u
T=$(mktemp -d /tmp/resolve-test.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
mkdir -p "$T/b/bin" "$T/elsewhere"
echo 'int pcfake(void) { return 42; }' > "$T/fake.c"
echo 'int pcfake(void); int main(void) { return pcfake() == 42 ? 0 : 1; }' > "$T/prog.c"
${CC:-gcc} -shared -fPIC -o "$T/elsewhere/libpcfake.so.1" -Wl,-soname,libpcfake.so.1 "$T/fake.c" || fail "cannot build the library"
ln -s libpcfake.so.1 "$T/elsewhere/libpcfake.so"
${CC:-gcc} -o "$T/b/bin/prog" "$T/prog.c" -L"$T/elsewhere" -lpcfake || fail "cannot build the program"
unset LD_LIBRARY_PATH
ldd "$T/b/bin/prog" | grep -q 'libpcfake.so.1 => not found' || fail "the library resolves before the test (ldd: $(ldd "$T/b/bin/prog"))"
. tests/device/steps.sh
B=$T/b RESOLVE_DIRS="$T/nothing-here $T/elsewhere" resolve_libraries > "$T/out" 2>&1
grep -q "libpcfake.so.1 -> $T/elsewhere" "$T/out" || { cat "$T/out"; fail "resolve_libraries did not name the folder"; }
case ":${LD_LIBRARY_PATH:-}:" in *":$T/elsewhere:"*) ;; *) fail "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-} lacks $T/elsewhere" ;; esac
bash -c "ldd '$T/b/bin/prog'" | grep -q 'not found' && fail "still unresolved in a child shell"
bash -c "'$T/b/bin/prog'" || fail "the program does not run in a child shell"
echo "ok: resolve_libraries found libpcfake.so.1 in RESOLVE_DIRS and exported LD_LIBRARY_PATH"
