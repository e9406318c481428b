"""The ONNX backend conformance suite, compiled and run on the host.

Runs every node case (and the pytorch-converted, pytorch-operator, simple and
light model directories; the three largest light models only with
MTVM_CONFORMANCE_FULL=1) through mtvm.conformance, in batches on all cores:
the pass count must reach THRESHOLD and no case listed in expected_pass.txt
(written by `python -m mtvm.conformance --update`) may regress. A sample of
passing cases per operator is also built with -fsanitize=address,undefined.
"""
import collections
import os

from mtvm import conformance

# Raised as coverage grows; the count comes from the run, never by hand.
NODE_THRESHOLD = 1745
JOBS = int(os.environ.get("MTVM_CONFORMANCE_JOBS", os.cpu_count() or 2))


# The three largest light_* models (60-140 M parameters, minutes each on a
# loaded CI machine) run with MTVM_CONFORMANCE_FULL=1 and in the runner's report.
BIG_MODELS = {"test_light_vgg19", "test_light_bvlc_alexnet", "test_light_zfnet512"}
FULL = bool(os.environ.get("MTVM_CONFORMANCE_FULL"))


def test_backend_suite():
    """One test (pytest-xdist would otherwise run the suite once per worker)."""
    cases = [c for c in conformance.collect() if FULL or c.name not in BIG_MODELS]
    rs = conformance.run_all(cases, jobs=JOBS)
    problems = []

    node = [r for r in rs if r.suite == "node"]
    passed = sum(r.status == "pass" for r in node)
    if len(node) != conformance.NODE_TOTAL:
        problems.append(f"{len(node)} node cases ran, expected {conformance.NODE_TOTAL}")
    if passed < NODE_THRESHOLD:
        problems.append(f"only {passed} of {conformance.NODE_TOTAL} node cases pass "
                        f"(threshold {NODE_THRESHOLD})")

    # No case of the checked-in expected-pass list may regress.
    expected = set(conformance.read_expected(conformance.EXPECTED_PASS))
    status = {r.name: r for r in rs}
    skipped = set() if FULL else BIG_MODELS
    for n in sorted(expected - skipped):
        if n not in status:
            problems.append(f"regressed: {n}: missing")
        elif status[n].status != "pass":
            problems.append(f"regressed: {n}: {status[n].status}: {status[n].reason}")

    # Every supported op's C under ASan/UBSan: passing cases, two per op.
    passing = {r.name for r in node if r.status == "pass"}
    per_op = collections.defaultdict(list)
    for c in cases:
        if c.name in passing and len(per_op[c.op]) < 2:
            per_op[c.op].append(c)
    sample = [c for cs in per_op.values() for c in cs]
    for r in conformance.run_all(sample, jobs=JOBS, batch_size=60, sanitize=True):
        if r.status != "pass":
            problems.append(f"sanitized: {r.name}: {r.status}: {r.reason}")
    assert not problems, "\n".join(problems)


# Node cases the LLVM backend passes (mtvm.codegen.llvm); raised as lowerings are added.
LLVM_NODE_THRESHOLD = 1740


def test_backend_suite_with_the_llvm_backend():
    """Every node case compiled with backend="llvm" and run through LLVM's JIT:
    no case the C backend passes (expected_pass.txt) may fail or crash with the
    LLVM backend, the count must reach LLVM_NODE_THRESHOLD, and no case of
    expected_pass_llvm.txt may regress."""
    cases = [c for c in conformance.collect(("node",))]
    rs = conformance.run_all(cases, jobs=JOBS, backend="llvm")
    c_pass = set(conformance.read_expected(conformance.EXPECTED_PASS))
    problems = [f"{r.name}: {r.status}: {r.reason}" for r in rs
                if r.status in ("fail", "crash") and (r.name in c_pass or r.status == "crash")]
    passed = {r.name for r in rs if r.status == "pass"}
    if len(passed) < LLVM_NODE_THRESHOLD:
        problems.append(f"only {len(passed)} node cases pass with the LLVM backend "
                        f"(threshold {LLVM_NODE_THRESHOLD})")
    for n in sorted(set(conformance.read_expected(conformance.EXPECTED_PASS_LLVM)) - passed):
        problems.append(f"regressed with the LLVM backend: {n}")
    assert not problems, "\n".join(problems)
