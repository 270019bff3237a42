"""Outcome parsing and comparison for compat/python/regrtest.sh.

    report.py parse DIR MODULE MODE
        reads DIR/MODULE.{log,xml,rc,time,stats} of one regrtest run of one test
        module, writes DIR/MODULE.cases (case<TAB>outcome) and prints the
        module's line: module, outcome, cases, not-passing cases, seconds,
        preemptions, first not-passing cases (for the progress line)
    report.py diffs RESULTS MODE...
        prints the modules whose outcome or any case's outcome differs from the
        first mode, one per line
    report.py report RESULTS SET OUT_PREFIX RERUNS MODE...
        writes OUT_PREFIX.tsv (modules), OUT_PREFIX-cases.tsv (test cases) and
        OUT_PREFIX-summary.txt, prints the summary, and exits 1 if a
        difference remains that is not explained by the baseline's own
        flakiness

Case outcomes: PASS FAIL ERROR SKIP XFAIL XPASS, TIMEOUT or CRASH (the case
that was running when the process timed out or died), MISSING (the case did
not run in this mode: the module died earlier, or a class or module fixture
failed). Module outcomes: PASS FAIL ENV_CHANGED SKIP NO_TESTS TIMEOUT
CRASH-SIGNAME ERROR-rcN (regrtest itself failed) MISSING.

Written for the project; uses only the standard library.
"""

import os
import re
import signal
import sys
import xml.etree.ElementTree as ET

FIXTURES = ("setUpClass", "tearDownClass", "setUpModule", "tearDownModule")
GOOD = ("PASS", "SKIP", "XFAIL")


def read(path, default=""):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return default


def desc_to_id(token, paren):
    """unittest's str(test) is 'name (qualified)'; turn it into test.id()."""
    if token in FIXTURES:
        return f"{token} ({paren})"
    if paren.endswith("." + token):
        return paren  # TestCase: 'test_x (test.mod.Cls.test_x)'
    return f"{paren}.{token}"  # doctest: 'func (test.mod)'


# 'test_x (test.mod.Cls.test_x)', optionally ' (subtest params)', then
# optionally ' ... status' when the test has no docstring. Failing subtests
# are printed indented by two spaces, with their status.
START = re.compile(r"^(  )?(\S+) \(([^()\s]+)\)( \(.*\)| \[.*\])?(?: \.\.\. (.*))?$")
STATUS = re.compile(r"\.\.\. (ok|FAIL|ERROR|skipped.*|expected failure|unexpected success)\s*$")
HEADER = re.compile(r"^(FAIL|ERROR): (\S+) \(([^()\s]+)\)")
VERBOSE_STATUS = {
    "ok": "PASS", "FAIL": "FAIL", "ERROR": "ERROR",
    "expected failure": "XFAIL", "unexpected success": "XPASS",
}


def status_word(s):
    s = s.strip()
    if s.startswith("skipped"):
        return "SKIP"
    return VERBOSE_STATUS.get(s)


def parse_verbose(log):
    """-v output: [(id, outcome or None)] in order of start, plus the ids that
    printErrors lists under FAIL:/ERROR: headers (subtests included)."""
    started = []
    current = None
    headers = {}
    for line in log.splitlines():
        m = HEADER.match(line)
        if m:
            cid = desc_to_id(m.group(2), m.group(3))
            # ERROR wins over FAIL for a test with both kinds of subtests.
            if headers.get(cid) != "ERROR":
                headers[cid] = m.group(1)
            continue
        m = START.match(line)
        if m and "." in m.group(3):
            cid = desc_to_id(m.group(2), m.group(3))
            st = status_word(m.group(5)) if m.group(5) else None
            if m.group(1) or m.group(4):
                # A subtest's result: it fails its parent test.
                if st in ("FAIL", "ERROR"):
                    for i in range(len(started) - 1, -1, -1):
                        if started[i][0] == cid:
                            if started[i][1] != "ERROR":
                                started[i] = (cid, st)
                            break
                    current = None
                continue
            started.append((cid, st))
            current = None if st else cid
            continue
        if current is not None:
            m = STATUS.search(line)
            if m:
                started[-1] = (current, status_word(m.group(1)))
                current = None
    return started, headers


def parse_junit(text):
    """[(id, outcome)] from regrtest's --junit-xml, in order."""
    out = []
    try:
        root = ET.fromstring(text)
    except ET.ParseError:
        return None
    for tc in root.iter("testcase"):
        name = tc.get("name")
        if not name:
            # Started but no result recorded: regrtest's XML result class does
            # not record failing subtests; the -v headers fill these in.
            continue
        kinds = {child.tag for child in tc}
        if "error" in kinds:
            res = "ERROR"
        elif "failure" in kinds:
            res = "FAIL"
        elif "skipped" in kinds:
            res = "SKIP"
        elif "output" in kinds:
            res = "XFAIL"
        elif "outcome" in kinds:
            res = "XPASS"
        else:
            res = "PASS"
        out.append((name, res))
    return out


def signame(n):
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"SIG{n}"


def module_outcome(log, rc, outer_timeout):
    if outer_timeout or re.search(r"Timeout \(\d+:\d\d:\d\d\)!$", log, re.M):
        return "TIMEOUT"
    if rc < 0:
        return "CRASH-" + signame(-rc)
    if rc > 128 and rc - 128 < 65:
        return "CRASH-" + signame(rc - 128)
    if re.search(r"^Fatal Python error", log, re.M):
        return "CRASH-fatal"
    if re.search(r"^\d+ tests? failed( again)?:$", log, re.M):
        return "FAIL"
    if re.search(r"^\d+ tests? altered the execution environment:$", log, re.M):
        return "ENV_CHANGED"
    if re.search(r"^\d+ tests? skipped", log, re.M):
        return "SKIP"
    if re.search(r"^\d+ tests? run no tests:$", log, re.M):
        return "NO_TESTS"
    if re.search(r"^(All \d+ tests OK\.|\d+ tests? OK\.)$", log, re.M) and rc == 0:
        return "PASS"
    return f"ERROR-rc{rc}"


def stats_preemptions(text):
    return sum(int(m) for m in re.findall(r"preemptions=(\d+)", text))


def cmd_parse(d, module, mode):
    base = os.path.join(d, module)
    log = read(base + ".log")
    rcs = read(base + ".rc", "").split()
    rc = int(rcs[0]) if rcs else 255
    outer_timeout = len(rcs) > 1 and rcs[1] == "outer-timeout"
    tf = read(base + ".time", "0 0").split()
    seconds = tf[0] if tf else "0"
    cpu = tf[1] if len(tf) > 1 else "-"
    outcome = module_outcome(log, rc, outer_timeout)

    started, headers = parse_verbose(log)
    junit = parse_junit(read(base + ".xml")) if os.path.exists(base + ".xml") else None
    cases = {}
    order = []

    def put(cid, res):
        if cid not in cases:
            order.append(cid)
        cases[cid] = res

    if junit is not None:
        seen = {}
        for cid, res in junit:
            # The same test can run twice in a module (a class reused by two
            # suites); keep every run apart.
            seen[cid] = seen.get(cid, 0) + 1
            put(cid if seen[cid] == 1 else f"{cid}#{seen[cid]}", res)
    else:
        # No XML: the process died. The -v lines say what ran; the last one
        # without a result is what it died in.
        for i, (cid, res) in enumerate(started):
            if res is None:
                last = i == len(started) - 1
                if last and outcome == "TIMEOUT":
                    res = "TIMEOUT"
                elif last and outcome.startswith("CRASH"):
                    res = "CRASH"
                else:
                    res = "MISSING"
            put(cid, res)
    for cid, res in headers.items():
        if cases.get(cid) not in ("ERROR",):
            put(cid, res)

    with open(base + ".cases", "w", encoding="utf-8") as f:
        for cid in order:
            f.write(f"{cid}\t{cases[cid]}\n")
    bad = [c for c in order if cases[c] not in GOOD]
    pre = stats_preemptions(read(base + ".stats")) if mode != "plain" else "-"
    first = ",".join(c.rsplit(".", 1)[-1] for c in bad[:3]) + (",..." if len(bad) > 3 else "")
    print(f"{module}\t{outcome}\t{len(order)}\t{len(bad)}\t{seconds}\t{pre}\t{cpu}\t{first}")


# ---------------------------------------------------------------------------
# Comparison.

class Run:
    """One run of every module in one mode: DIR/outcomes plus DIR/MODULE.cases
    (and DIR/MODULE.keys for reruns: '*' for the whole module, else the test
    cases that were rerun)."""

    def __init__(self, d):
        self.mods = {}   # module -> [outcome, ncases, nbad, seconds, preemptions, cpu]
        self.cases = {}  # module -> {case: outcome}
        self.keys = {}   # module -> None (whole module) or set of cases
        self.order = []
        for line in read(os.path.join(d, "outcomes")).splitlines():
            f = line.split("\t")
            if len(f) < 7:
                continue
            m = f[0]
            self.order.append(m)
            self.mods[m] = f[1:7]
            cs = {}
            for cl in read(os.path.join(d, m + ".cases")).splitlines():
                c = cl.split("\t")
                if len(c) == 2:
                    cs[c[0]] = c[1]
            self.cases[m] = cs
            k = read(os.path.join(d, m + ".keys"), "*").split("\n")
            k = [x for x in k if x]
            self.keys[m] = None if k in ([], ["*"]) else set(k)

    def outcome(self, m):
        return self.mods.get(m, ["MISSING"])[0]

    def died(self, m):
        o = self.outcome(m)
        return o == "TIMEOUT" or o.startswith("CRASH")

    def value(self, m, key):
        """Outcome of a key ('<module>' or a case id), None if not covered."""
        if key == "<module>":
            return self.outcome(m) if self.keys.get(m) is None else None
        ks = self.keys.get(m)
        if ks is not None and key.split("#")[0] not in ks:
            return None
        return self.cases.get(m, {}).get(key, "MISSING")

    def field(self, m, i, default="-"):
        v = self.mods.get(m)
        return v[i] if v and len(v) > i and v[i] != "" else default


def diff_keys(base, other, m):
    """Keys of module m whose outcome differs between two runs. A case that
    did not run because the module timed out or crashed earlier is not a
    difference of its own (the module's outcome and the case it died in are)."""
    keys = set(base.cases.get(m, {})) | set(other.cases.get(m, {})) | {"<module>"}
    out = []
    for k in sorted(keys):
        a, b = base.value(m, k), other.value(m, k)
        if a is None or b is None or a == b:
            continue
        if k != "<module>" and ((b == "MISSING" and other.died(m)) or (a == "MISSING" and base.died(m))):
            continue
        out.append(k)
    return out


def cmd_diffs(results, modes):
    """Prints MODULE or MODULE:CASE,CASE... for each differing module: the
    cases to rerun when they explain the difference, else the whole module."""
    runs = {m: Run(os.path.join(results, m)) for m in modes}
    base = runs[modes[0]]
    for mod in base.order:
        keys = set()
        for m in modes[1:]:
            keys.update(diff_keys(base, runs[m], mod))
        if not keys:
            continue
        cases = sorted({k.split("#")[0] for k in keys if k != "<module>"})
        whole = (not cases or len(cases) > 40
                 or any(" " in c or "," in c or ":" in c for c in cases))
        if not whole and "<module>" in keys:
            # The module outcome must follow from the cases: FAIL, TIMEOUT or
            # CRASH with a case to blame; ENV_CHANGED and the like need the
            # whole module.
            for m in modes:
                o = runs[m].outcome(mod)
                if o not in ("PASS", "FAIL", "TIMEOUT", "SKIP") and not o.startswith("CRASH"):
                    whole = True
        print(mod if whole else mod + ":" + ",".join(cases))


def fmt_secs(s):
    s = int(round(s))
    return f"{s // 60}m{s % 60:02d}s"


def fnum(x):
    try:
        return float(x)
    except ValueError:
        return 0.0


def cmd_report(results, set_name, prefix, reruns, modes):
    reruns = int(reruns)
    base_mode = modes[0]
    runs = {m: Run(os.path.join(results, m)) for m in modes}
    base = runs[base_mode]
    modules = base.order
    rr = []  # per rerun: {mode: Run}
    for i in range(1, reruns + 1):
        d = os.path.join(results, f"rerun-{i}")
        if os.path.isdir(d):
            rr.append({m: Run(os.path.join(d, m)) for m in modes
                       if os.path.isdir(os.path.join(d, m))})

    differing = {}  # module -> sorted keys
    for mod in modules:
        ks = set()
        for m in modes[1:]:
            ks.update(diff_keys(base, runs[m], mod))
        if ks:
            differing[mod] = sorted(ks, key=lambda k: (k != "<module>", k))

    # Module table.
    with open(prefix + ".tsv", "w", encoding="utf-8") as f:
        hdr = ["module"] + modes + [f"seconds_{m}" for m in modes] + [f"cpu_{m}" for m in modes]
        hdr += ["cases"] + [f"not_passing_{m}" for m in modes]
        hdr += [f"preemptions_{m}" for m in modes[1:]] + ["differing_cases"]
        f.write("\t".join(hdr) + "\n")
        for mod in modules:
            row = [mod] + [runs[m].outcome(mod) for m in modes]
            row += [runs[m].field(mod, 3) for m in modes]
            row += [runs[m].field(mod, 5) for m in modes]
            row += [base.field(mod, 1, "0")]
            row += [runs[m].field(mod, 2) for m in modes]
            row += [runs[m].field(mod, 4) for m in modes[1:]]
            row.append(str(len([k for k in differing.get(mod, []) if k != "<module>"])))
            f.write("\t".join(row) + "\n")

    # Case table.
    with open(prefix + "-cases.tsv", "w", encoding="utf-8") as f:
        f.write("\t".join(["module", "case"] + modes) + "\n")
        for mod in modules:
            allc, seen = [], set()
            for m in modes:
                for c in runs[m].cases.get(mod, {}):
                    if c not in seen:
                        seen.add(c)
                        allc.append(c)
            for c in allc:
                f.write("\t".join([mod, c] + [runs[m].cases.get(mod, {}).get(c, "MISSING") for m in modes]) + "\n")

    lines = []
    say = lines.append
    say(f"CPython regrtest, {set_name} set: {len(modules)} test modules; modes: {' '.join(modes)}")
    say(read(os.path.join(results, "environment")).rstrip())
    say("")
    say("totals per mode: wall and CPU time of the module runs (summed), module")
    say("outcomes, test-case outcomes, preemptions:")
    for m in modes:
        r = runs[m]
        secs = sum(fnum(r.field(mod, 3, "0")) for mod in modules)
        cpu = sum(fnum(r.field(mod, 5, "0")) for mod in modules)
        mc, cc = {}, {}
        for mod in modules:
            o = r.outcome(mod)
            mc[o] = mc.get(o, 0) + 1
            for v in r.cases.get(mod, {}).values():
                cc[v] = cc.get(v, 0) + 1
        ms = " ".join(f"{k}={v}" for k, v in sorted(mc.items()))
        cs = " ".join(f"{k}={v}" for k, v in sorted(cc.items()))
        say(f"  {m:<6} wall {fmt_secs(secs)}, cpu {fmt_secs(cpu)}; modules: {ms}")
        say(f"  {'':<6} cases ({sum(cc.values())}): {cs}")
        if m != base_mode:
            pre = sum(int(r.field(mod, 4, "0")) for mod in modules if r.field(mod, 4, "0").isdigit())
            say(f"  {'':<6} preemptions: {pre}")
    say("")

    real = flaky = 0
    diff_lines = []
    for mod, keys in differing.items():
        mod_real = False
        detail = []
        for key in keys:
            per_mode = {}
            for m in modes:
                vals = [runs[m].value(mod, key) or "-"]
                for r in rr:
                    if m in r and mod in r[m].mods:
                        v = r[m].value(mod, key)
                        if v is not None:
                            vals.append(v)
                per_mode[m] = vals
            if key == "<module>" and all(len(v) == 1 for v in per_mode.values()) and rr:
                # Reruns of single cases say nothing about the module's own
                # outcome: it follows the cases'.
                verdict = "follows the cases"
            elif len(set(per_mode[base_mode])) > 1:
                verdict = "flaky in plain"
            else:
                bv = per_mode[base_mode][0]
                repro = {m: sum(v != bv for v in per_mode[m]) for m in modes[1:]}
                verdict = "DIFFERS (" + ", ".join(
                    f"{m}: {repro[m]}/{len(per_mode[m])} runs" for m in modes[1:]) + ")"
                mod_real = True
            shown = "  ".join(f"{m}={','.join(v)}" for m, v in per_mode.items())
            name = key if key == "<module>" else key.replace(f"test.{mod}.", "")
            detail.append(f"      {name}: {shown}  -> {verdict}")
        if mod_real:
            real += 1
        else:
            flaky += 1
        head = f"  {mod}: " + " ".join(f"{m}={runs[m].outcome(mod)}" for m in modes)
        notrun = []
        for m in modes[1:]:
            if runs[m].died(mod):
                got = runs[m].cases.get(mod, {})
                n = sum(1 for c in base.cases.get(mod, {}) if got.get(c, "MISSING") == "MISSING")
                notrun.append(f"{m}: {n} cases not run after it")
        if notrun:
            head += " (" + "; ".join(notrun) + ")"
        head += "  -> DIFFERS" if mod_real else "  -> flaky in plain (not counted)"
        diff_lines.append(head)
        if len(detail) > 12:
            detail = detail[:12] + [f"      ... {len(detail) - 12} more (see the cases table)"]
        diff_lines.extend(detail)
    if diff_lines:
        say(f"differences from {base_mode} (per key: the first run's outcome, then the reruns'):")
        lines.extend(diff_lines)
    else:
        say(f"differences from {base_mode}: none")
    say("")
    bad = [f"{mod}={base.outcome(mod)}" for mod in modules
           if base.outcome(mod) not in ("PASS", "SKIP", "NO_TESTS")]
    say(f"modules not passing in {base_mode}: " + (" ".join(bad) if bad else "none"))
    say(f"tables: {prefix}.tsv, {prefix}-cases.tsv; logs: {results}/MODE/MODULE.log")
    text = "\n".join(lines) + "\n"
    with open(prefix + "-summary.txt", "w", encoding="utf-8") as f:
        f.write(text)
    sys.stdout.write(text)
    print(f"python-{set_name}: {len(modules) - real - flaky} same, {real} differ, {flaky} flaky in plain")
    return 1 if real else 0


def main(argv):
    if len(argv) >= 4 and argv[0] == "parse":
        cmd_parse(argv[1], argv[2], argv[3])
        return 0
    if len(argv) >= 3 and argv[0] == "diffs":
        cmd_diffs(argv[1], argv[2:])
        return 0
    if len(argv) >= 6 and argv[0] == "report":
        return cmd_report(argv[1], argv[2], argv[3], argv[4], argv[5:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
