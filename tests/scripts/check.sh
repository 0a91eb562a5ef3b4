# shellcheck shell=bash disable=SC2034  # status is read by the test that sources this
# Sourced by the script tests: check WHAT COMMAND... runs COMMAND, prints "ok   WHAT" or "FAIL WHAT", and sets
# status=1 on a failure; the test ends with `exit $status`.
status=0
check() {
  local what=$1
  shift
  if "$@"; then
    echo "ok   $what"
  else
    echo "FAIL $what"
    status=1
  fi
}
