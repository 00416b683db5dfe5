#!/bin/bash
# check_links.sh: no binary under $B needs an optional or distribution-specific library at load
# time.  readelf -d of every ELF executable in $B/bin, $B/tests, $B/bench and their subfolders: FAIL when one has
# libpapi (optional: opened at run time by trainer/metrics.c) or a libjpeg soname (Debian's
# libjpeg.so.62 vs Ubuntu's libjpeg.so.8: linked statically, trainer/data.mk) among its NEEDED
# entries.  Also prints what ldd cannot resolve on this machine (informational).
B=${B:-build}
command -v readelf >/dev/null 2>&1 || { echo "SKIP: no readelf (binutils)"; exit 77; }
fail=0 n=0
while IFS= read -r f; do
  head -c 4 "$f" 2>/dev/null | grep -q 'ELF' || continue
  n=$((n + 1))
  need=$(readelf -d "$f" 2>/dev/null | awk '/\(NEEDED\)/{gsub(/[][]/, "", $NF); print $NF}')
  bad=$(echo "$need" | grep -E '^(libpapi|libpfm|libjpeg)\.so' | tr '\n' ' ')
  if [ -n "$bad" ]; then echo "FAIL: $f needs $bad"; fail=1; fi
  miss=$(ldd "$f" 2>/dev/null | awk '/not found/{print $1}' | tr '\n' ' ')
  [ -n "$miss" ] && echo "note: $f: not found here: $miss"
done < <(find "$B/bin" "$B/tests" "$B/bench" -type f -perm -u+x 2>/dev/null | sort)
[ $n -gt 0 ] || { echo "FAIL: no binaries under $B (make build-all)"; exit 1; }
[ $fail = 0 ] && echo "PASS: $n binaries, none needs libpapi, libpfm or a libjpeg soname"
exit $fail
