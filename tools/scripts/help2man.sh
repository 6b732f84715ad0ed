#!/bin/sh
# A manual page (man(7) troff, section 1) from a tpc tool's --help, which every tool prints in one
# layout (tools/common's tpc_cli): "OVERVIEW: name — summary", "USAGE: ...", then sections whose
# title is a line in capitals ending with ':' ("OPTIONS:", "RANKS AS PROCESSES:").
# Usage: help2man.sh TOOL VERSION OUT   (TOOL: the built binary; OUT: the .1 file)
# cmake/install.cmake runs it at build time for every tool and installs the pages in share/man/man1.
set -eu
tool="$1" version="$2" out="$3"
name=$(basename "$tool")
tmp="$out.tmp"
"$tool" --help 2>&1 | awk -v name="$name" -v version="$version" '
function esc(s) {
  gsub(/\\/, "\\e", s)
  if (s ~ /^[.'\'']/) s = "\\&" s
  return s
}
BEGIN {
  upper = toupper(name)
  printf ".TH %s 1 \"\" \"tpc %s\" \"tpc manual\"\n", upper, version
  section = ""
}
/^OVERVIEW: / {
  line = substr($0, 11)
  sub(/^[^ ]+ — /, "", line)
  printf ".SH NAME\n%s \\- %s\n", name, esc(line)
  next
}
/^USAGE: / {
  printf ".SH SYNOPSIS\n.nf\n%s\n.fi\n", esc(substr($0, 8))
  next
}
/^[A-Z][A-Z ]*:$/ {
  if (section != "") print ".fi"
  section = substr($0, 1, length($0) - 1)
  printf ".SH %s\n.nf\n", section
  next
}
{
  if (section == "") { if ($0 != "") { print ".SH DESCRIPTION\n.nf"; section = "DESCRIPTION" } else next }
  print esc($0)
}
END { if (section != "") print ".fi" }
' > "$tmp"
# A page needs its NAME line: a tool whose --help failed or changed layout must not install an
# empty page.
if ! grep -q '^\.SH NAME' "$tmp"; then
  echo "help2man.sh: '$tool --help' printed no 'OVERVIEW: $name — ...' line" >&2
  rm -f "$tmp"
  exit 1
fi
mv "$tmp" "$out"
