#!/usr/bin/env python3
"""Checks that every tp verifier rule id is tested and documented.

Usage: check_rule_coverage.py <tpc source root>

A rule id is a string literal of the form "<family>.<name>" (linear.k, quant.global-scale,
moe_route.top_k) in dialect/tpc_verify*.c. Every id must have
  - an expected-error (or a positive FileCheck line) matching "violates rule <id>:" in
    test/dialect/invalid-*.mlir, and
  - a mention in docs/dialect.md (as a whole id, so linear.k is not found inside grouped_linear.k).
Prints the ids that are missing from either place and exits 1, or prints a summary and exits 0.
"""
import glob
import os
import re
import sys

# A whole string literal that looks like a rule id. Op names ("tp.linear"), upstream op names
# ("builtin.module") and file names ("tp_ops.h") have the same shape and are not rule ids.
RULE_LITERAL = re.compile(r'"([a-z][a-z0-9_]*\.[a-z][a-z0-9_-]*)"')
NOT_RULES = re.compile(r'^(tp|builtin|func)\.|\.(h|c|inc|mlir)$')

# An expected diagnostic (`// expected-error {{... violates rule <id>: ...}}`, checked by
# tpc-opt --verify-diagnostics) or a positive FileCheck directive (CHECK:, FOO-SAME:, ...; not
# *-NOT:) naming a rule.
CHECK_RULE = re.compile(r'//\s*(?:expected-error\S*\s*\{\{|[A-Z][A-Z0-9_]*(?:-(?!NOT:)[A-Z]+)?:).*?'
                        r'violates rule ([a-z0-9_.-]+):')


def rule_ids(src):
    """Returns {rule id: [files that use it]} for dialect/tpc_verify*.c."""
    ids = {}
    for path in sorted(glob.glob(os.path.join(src, "dialect", "tpc_verify*.c"))):
        with open(path, encoding="utf-8") as f:
            for rule in RULE_LITERAL.findall(f.read()):
                if not NOT_RULES.search(rule):
                    ids.setdefault(rule, []).append(os.path.basename(path))
    return ids


def tested_ids(src):
    """Returns the rule ids named by a positive CHECK line of test/dialect/invalid-*.mlir."""
    tested = set()
    for path in sorted(glob.glob(os.path.join(src, "test", "dialect", "invalid-*.mlir"))):
        with open(path, encoding="utf-8") as f:
            for line in f:
                m = CHECK_RULE.search(line)
                if m:
                    tested.add(m.group(1))
    return tested


def documented(doc_text, rule):
    """Whether |rule| appears in |doc_text| as a whole id."""
    return re.search(r"(?<![\w.-])" + re.escape(rule) + r"(?![\w-])", doc_text) is not None


def main(argv):
    if len(argv) != 2:
        print("usage: check_rule_coverage.py <tpc source root>", file=sys.stderr)
        return 2
    src = argv[1]
    ids = rule_ids(src)
    if not ids:
        print("error: found no rule ids in %s/dialect/tpc_verify*.c" % src, file=sys.stderr)
        return 1

    failed = False
    tested = tested_ids(src)
    untested = sorted(r for r in ids if r not in tested)
    if untested:
        failed = True
        print("error: %d rule id(s) have no 'violates rule <id>:' CHECK in test/dialect/invalid-*.mlir:"
              % len(untested), file=sys.stderr)
        for r in untested:
            print("  %s (%s)" % (r, ", ".join(sorted(set(ids[r])))), file=sys.stderr)

    doc_path = os.path.join(src, "docs", "dialect.md")
    if not os.path.exists(doc_path):
        failed = True
        print("error: docs/dialect.md does not exist; it must list all %d rule ids" % len(ids), file=sys.stderr)
    else:
        with open(doc_path, encoding="utf-8") as f:
            doc = f.read()
        undocumented = sorted(r for r in ids if not documented(doc, r))
        if undocumented:
            failed = True
            print("error: %d rule id(s) are not mentioned in docs/dialect.md:" % len(undocumented), file=sys.stderr)
            for r in undocumented:
                print("  %s" % r, file=sys.stderr)

    if failed:
        return 1
    print("%d rule ids, each tested and documented" % len(ids))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
