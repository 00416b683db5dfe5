#!/bin/bash
# experiments/lib.sh: sourced by experiments/<claim>.sh (not run). What every claim's script shares:
#   exp_die MSG          one line "experiments/NAME.sh: MSG" on stderr, exit 2
#   exp_help             prints the calling script's header comment (its --help), exit 0
#   exp_cmd ARG...       the command as one line, an argument with a space (or empty) in double
#                        quotes: the spelling docs/EXPERIMENTS.md and --dry-run use
#   exp_run ARG...       with --dry-run (DRY=1) prints exp_cmd ARG...; else runs it, returns its status
#   exp_meta DIR LINE... appends to DIR/meta.txt a block: the script's own command line, each LINE
#                        (the commands it runs), commit (git describe), machine (lscpu's model name,
#                        cores), start date (UTC); exp_meta_end DIR STATUS adds the end date and status
#   exp_table FILE CMD...  runs CMD, its output to FILE and to stdout (the table printed at the end)
# Callers set EXP_NAME before sourcing and EXP_ARGS (their own arguments, for meta.txt).
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
B=${B:-build}
DRY=0
exp_die() { echo "experiments/$EXP_NAME.sh: $*" >&2; exit 2; }
exp_help() { sed -n '2,/^[^#]/p' "experiments/$EXP_NAME.sh" | sed '$d; s/^# \{0,1\}//'; exit 0; }
exp_cmd() {
  local a out=""
  for a in "$@"; do
    if [ -z "$a" ] || [[ $a == *[[:space:]]* ]]; then out+=" \"$a\""; else out+=" $a"; fi
  done
  echo "${out# }"
}
exp_run() {
  if [ "$DRY" = 1 ]; then exp_cmd "$@"; return 0; fi
  echo "experiments/$EXP_NAME.sh: $(date -u +%H:%M:%S) $(exp_cmd "$@")"
  "$@"
}
exp_meta() {
  local d=$1; shift
  [ "$DRY" = 1 ] && return 0
  mkdir -p "$d"
  {
    echo "== $(exp_cmd bash "experiments/$EXP_NAME.sh" "${EXP_ARGS[@]}")"
    local l
    for l in "$@"; do echo "runs: $l"; done
    echo "commit: $(git describe --always --dirty --tags 2>/dev/null || echo unknown)"
    echo "machine: $(lscpu 2>/dev/null | sed -n 's/^Model name:[[:space:]]*//p' | head -1), $(nproc) cores, $(hostname)"
    echo "start: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  } >>"$d/meta.txt"
}
exp_meta_end() {
  [ "$DRY" = 1 ] && return 0
  echo "end: $(date -u +%Y-%m-%dT%H:%M:%SZ), exit $2" >>"$1/meta.txt"
}
exp_table() {
  local f=$1; shift
  if [ "$DRY" = 1 ]; then exp_cmd "$@"; return 0; fi
  mkdir -p "$(dirname "$f")"
  "$@" >"$f" 2>&1
  local rc=$?
  cat "$f"
  echo "experiments/$EXP_NAME.sh: the table above is in $f"
  return $rc
}
# exp_race_tables DIR P [FILE...]: the tables jobs/ddp_race.sh wrote for P ranks, printed again at
# the end without their 'files:' lines (the runs each table read, kept in the files): by default
# DIR/compare-pP.md, DIR/compare-pP-held.md (time to DDP's mean final top-1, first crossing and
# held) and DIR/overhead-pP.txt (the per-step overhead against DDP); else DIR/FILE for each FILE
exp_race_tables() {
  local d=$1 p=$2 f rc=0
  shift 2
  [ $# -gt 0 ] || set -- "compare-p$p.md" "compare-p$p-held.md" "overhead-p$p.txt"
  if [ "$DRY" = 1 ]; then echo "cat ${*/#/$d/}"; return 0; fi
  for f in "$@"; do
    echo
    if [ -s "$d/$f" ]; then echo "== $d/$f"; grep -v '^files: ' "$d/$f" || true
    else echo "experiments/$EXP_NAME.sh: no $d/$f"; rc=1; fi
  done
  return $rc
}
# exp_opts "NAME ..." ARG...: parses the script's arguments: --NAME VALUE for each NAME listed (into
# OPT_NAME, whose default the caller sets before), --table (EXP_TABLE_ONLY=1), --dry-run (DRY=1), --help;
# anything else is refused with one line
EXP_TABLE_ONLY=0
exp_opts() {
  local names=" $1 " n
  shift
  while [ $# -gt 0 ]; do
    case $1 in
    --table) EXP_TABLE_ONLY=1 ;;
    --dry-run) DRY=1 ;;
    -h | --help) exp_help ;;
    --*)
      n=${1#--}
      [[ $names == *" $n "* ]] || exp_die "unknown option $1 (see --help)"
      [ $# -ge 2 ] || exp_die "$1 needs a value"
      printf -v "OPT_$n" '%s' "$2"
      shift ;;
    *) exp_die "unknown option $1 (see --help)" ;;
    esac
    shift
  done
}
# exp_count NAME...: each --NAME's value (OPT_NAME) a whole number >= 1, else refused with one line
exp_count() {
  local n ref
  for n in "$@"; do
    ref=OPT_$n
    [[ ${!ref} =~ ^[1-9][0-9]*$ ]] || exp_die "--$n takes a whole number >= 1, not '${!ref}'"
  done
}
# exp_go DIR CMD...: unless --table, records CMD in DIR/meta.txt, runs it (--dry-run: prints it) and
# records its end; returns its status
exp_go() {
  local d=$1 rc=0
  shift
  [ "$EXP_TABLE_ONLY" = 1 ] && return 0
  exp_meta "$d" "$(exp_cmd "$@")"
  exp_run "$@" || rc=$?
  exp_meta_end "$d" $rc
  return $rc
}
