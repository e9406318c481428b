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

import pytest

from mtvm import conformance

# Raised as coverage grows; the count comes from the run, never by hand.
NODE_THRESHOLD = 1300
JOBS = int(os.environ.get("MTVM_CONFORMANCE_JOBS", os.cpu_count() or 2))


# The three largest light_* models (60-140 M parameters, minutes each on a
# loaded CI machine) run with MTVM_CONFORMANCE_FULL=1 and in the runner's report.
BIG_MODELS = {"test_light_vgg19", "test_light_bvlc_alexnet", "test_light_zfnet512"}
FULL = bool(os.environ.get("MTVM_CONFORMANCE_FULL"))


@pytest.fixture(scope="module")
def results():
    cases = [c for c in conformance.collect() if FULL or c.name not in BIG_MODELS]
    return cases, conformance.run_all(cases, jobs=JOBS)


def test_node_pass_count(results):
    _, rs = results
    node = [r for r in rs if r.suite == "node"]
    passed = sum(r.status == "pass" for r in node)
    assert len(node) == conformance.NODE_TOTAL
    assert passed >= NODE_THRESHOLD, f"{passed} of {conformance.NODE_TOTAL} node cases pass"


def test_no_regressions(results):
    _, rs = results
    expected = set(conformance.read_expected(conformance.EXPECTED_PASS))
    status = {r.name: r for r in rs}
    skipped = set() if FULL else BIG_MODELS
    regressed = [f"{n}: {status[n].status}: {status[n].reason}" if n in status else f"{n}: missing"
                 for n in sorted(expected - skipped)
                 if n not in status or status[n].status != "pass"]
    assert not regressed, "cases that passed before:\n" + "\n".join(regressed)


def test_sanitized_sample_per_op(results):
    """One passing case per operator (two for the widest ones), built with
    ASan/UBSan as one executable per batch, each case its own process."""
    cases, rs = results
    passing = {r.name for r in rs if r.status == "pass" and r.suite == "node"}
    per_op = collections.defaultdict(list)
    for c in cases:
        if c.name in passing and len(per_op[c.op]) < 2:
            per_op[c.op].append(c)
    sample = [c for cs in per_op.values() for c in cs]
    out = conformance.run_all(sample, jobs=JOBS, batch_size=60, sanitize=True)
    bad = [f"{r.name}: {r.status}: {r.reason}" for r in out if r.status != "pass"]
    assert not bad, "\n".join(bad)
