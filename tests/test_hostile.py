"""The hostile-case harness (tests/hostile.py) itself: it must see what it is there to see,
or the hostile suites built on it could not fail."""

import pytest
from hostile import CANARY, case_folder, check_bounded, check_refused, run_case


def test_a_file_opened_outside_the_model_folder_is_reported(tmp_path):
    folder = case_folder(tmp_path)
    outcome = run_case(folder, api=f"(folder.parent / {CANARY!r}).read_bytes()")
    assert outcome.outcome == "ok"
    assert outcome.opened_outside == [str((tmp_path / CANARY).resolve())]
    with pytest.raises(AssertionError):
        check_bounded(outcome)


def test_memory_above_the_baseline_is_measured(tmp_path):
    outcome = run_case(case_folder(tmp_path), api="a = np.ones(300 * 2**20, np.uint8)")
    assert 290 <= outcome.rss_mib <= 400, outcome


def test_a_refusal_passes_and_a_traceback_does_not(tmp_path):
    folder = case_folder(tmp_path)
    (folder / "m.npz").write_bytes(b"not a zip")
    check_refused(run_case(folder, api="glcnn.load(folder / 'm.npz')"), "m.npz")
    check_refused(run_case(folder, cli=["info", str(folder / "m.npz")]), "m.npz", cli=True)
    raw = run_case(folder, api="int('x')")  # a ValueError escaping: not a clear refusal
    with pytest.raises(AssertionError):
        check_refused(raw)
