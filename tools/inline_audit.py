#!/usr/bin/env python3
"""Where does inlining move code that a path rule defers into functions it
does not? (docs/safety.md, "turquoise: preemptible futures", Inlining.)

Reads a binary's DWARF inline records (llvm-dwarfdump) and, for every
inlined instance of a function whose own path a deferral rule matches,
checks whether the out-of-line function it was inlined into is deferred too
(a frame the handler's walk sees). Prints the instances that are not: code of
a deferred path that a deadline can stop in.

    tools/inline_audit.py BINARY [PREFIX=defer|preempt ...]

Without rules, turquoise's (crates/turquoise/src/rules.rs) are used. Needs
llvm-dwarfdump and c++filt; the binary needs debug info (line tables are
enough: they carry the inline records).
"""
import re
import subprocess
import sys
from collections import Counter, defaultdict

TURQUOISE = [
    ("tokio::runtime::", True), ("tokio::sync::", True), ("tokio::sync::once_cell::", False), ("tokio::util::", True),
    ("tokio::task::spawn::", True), ("tokio::task::join_set::", True), ("tokio::task::yield_now", True),
    ("tokio::task::coop::", True), ("tokio::task::coop::Coop", False), ("tokio::task::coop::unconstrained", False),
    ("mio::", True), ("parking_lot_core::", True), ("futures_channel::", True), ("futures_util::lock::", True),
]


def self_path(name):
    """`<a::B as c::D>::f` -> `a::B::f` (as linger's ranges.rs)."""
    if not name.startswith("<"):
        return name
    depth, close = 1, None
    for i, c in enumerate(name[1:]):
        depth += {"<": 1, ">": -1}.get(c, 0)
        if depth == 0:
            close = i + 1
            break
    if close is None:
        return name
    ty = name[1:close].split(" as ")[0]
    for sigil in ("&mut ", "&", "*const ", "*mut ", "dyn "):
        if ty.startswith(sigil):
            ty = ty[len(sigil):]
    return ty + name[close + 1:]


def verdict(name, rules):
    path = self_path(name)
    best = max((p for p in rules if path.startswith(p[0])), key=lambda p: len(p[0]), default=None)
    return best is not None and best[1]


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    binary = sys.argv[1]
    rules = [(a.split("=")[0], a.split("=")[1] == "defer") for a in sys.argv[2:]] or TURQUOISE
    dump = subprocess.run(["llvm-dwarfdump", "--debug-info", binary], capture_output=True, text=True, check=True).stdout
    die = re.compile(r"^0x[0-9a-f]+:( +)(DW_TAG_\w+)")
    ref = re.compile(r'DW_AT_(linkage_name|abstract_origin|specification)\s+\((?:(0x[0-9a-f]+) )?"([^"]+)"\)')
    unit = re.compile(r"^(0x[0-9a-f]+): Compile Unit: .*\(next unit at (0x[0-9a-f]+)\)")
    pc = re.compile(r"DW_AT_(low_pc|high_pc)\s+\((0x[0-9a-f]+)\)")
    rng = re.compile(r"\[(0x[0-9a-f]+), (0x[0-9a-f]+)\)")
    # DIEs as (depth, tag, mangled name, [(lo, hi)], low_pc, origin in another unit)
    dies, cur, bounds = [], None, (0, 0)
    for line in dump.splitlines():
        m = unit.match(line)
        if m:
            bounds = (int(m.group(1), 16), int(m.group(2), 16))
            continue
        m = die.match(line)
        if m:
            cur = [len(m.group(1)), m.group(2), None, [], None, False]
            dies.append(cur)
            continue
        if cur is None:
            continue
        m = ref.search(line)
        if m and cur[2] is None:
            cur[2] = m.group(3)
            # ThinLTO across codegen units: the origin lies in another unit.
            cur[5] = m.group(2) is not None and not bounds[0] <= int(m.group(2), 16) < bounds[1]
        m = pc.search(line)
        if m:
            if m.group(1) == "low_pc":
                cur[4] = int(m.group(2), 16)
            elif cur[4] is not None:
                cur[3].append((cur[4], int(m.group(2), 16)))
        for lo, hi in rng.findall(line):
            cur[3].append((int(lo, 16), int(hi, 16)))
    names = sorted({d[2] for d in dies if d[2]})
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True).stdout.splitlines()
    demangled = {m: re.sub(r"::h[0-9a-f]{16}$", "", d) for m, d in zip(names, out)}

    # Walk the tree: the enclosing concrete function, and whether a deferred
    # inlined instance already encloses this one.
    stack = []  # (depth, tag, name, deferred)
    holes, bytes_in_holes, seen, far = Counter(), Counter(), 0, 0
    for depth, tag, mangled, ranges, _, other_unit in dies:
        while stack and stack[-1][0] >= depth:
            stack.pop()
        name = demangled.get(mangled, "")
        if tag == "DW_TAG_subprogram":
            stack.append((depth, tag, name, bool(ranges) and verdict(name, rules)))
        elif tag == "DW_TAG_inlined_subroutine":
            outer = next((s for s in reversed(stack) if s[1] == "DW_TAG_subprogram"), None)
            covered = any(s[3] for s in stack)
            mine = verdict(name, rules)
            if mine:
                seen += 1
                far += other_unit
            if mine and not covered and outer is not None:
                holes[(name, outer[2])] += 1
                bytes_in_holes[(name, outer[2])] += sum(hi - lo for lo, hi in ranges)
            stack.append((depth, tag, name, covered or mine))
        else:
            stack.append((depth, tag, name, False))
    print(f"{binary}: {seen} inlined instances of deferred paths ({far} of them from another unit); "
          f"{sum(holes.values())} of them ({sum(bytes_in_holes.values())} bytes) inside functions that are not deferred")
    by_origin = defaultdict(list)
    for (origin, outer), n in holes.items():
        by_origin[origin].append((outer, n, bytes_in_holes[(origin, outer)]))
    for origin, where in sorted(by_origin.items(), key=lambda e: -sum(w[2] for w in e[1])):
        print(f"  {origin}  ({sum(w[2] for w in where)} bytes)")
        for outer, n, b in sorted(where, key=lambda w: -w[2])[:4]:
            print(f"      in {outer}: {n}x, {b} bytes")


if __name__ == "__main__":
    main()
