"""The suite plugin: a run without a per-test timeout stops, hangs fail naming the test, slow
workers are marked, and ``--cuda-only`` cannot pass without a GPU."""

from __future__ import annotations

import os
import pathlib
import textwrap

import pytest

TOOLS = pathlib.Path(__file__).resolve().parent.parent

PLUGIN = ("-p", "pytest_rlstack", "-p", "no:cacheprovider")


@pytest.fixture
def run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    # the subprocess finds the plugin (tools/) and a test's stand-in modules (its directory)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TOOLS), str(pytester.path)]))

    def run(source: str, *args: str) -> pytest.RunResult:
        pytester.makepyfile(test_case=textwrap.dedent(source))
        return pytester.runpytest_subprocess(*PLUGIN, *args)

    return run


def test_a_run_without_a_timeout_is_refused(run):
    result = run("def test_ok():\n    pass\n")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*no per-test timeout is set*--timeout=*"])


def test_a_hanging_test_fails_and_names_itself(run):
    result = run(
        """
        import time

        def test_hangs():
            time.sleep(60)

        def test_after():
            pass
        """,
        "--timeout=1",
    )
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(["*Timeout*", "FAILED test_case.py::test_hangs*"])


def test_spawn_and_forkserver_cases_are_slow_fork_ones_are_not(run):
    result = run(
        """
        import pytest

        @pytest.mark.parametrize("start_method", ["fork", "spawn", "forkserver"])
        def test_start(start_method):
            pass

        @pytest.mark.slow
        def test_marked():
            pass
        """,
        "--timeout=30",
        "-m",
        "not slow",
        "-v",
    )
    result.assert_outcomes(passed=1, deselected=3)
    result.stdout.fnmatch_lines(["*test_start?fork? PASSED*"])


def test_cuda_only_refuses_to_run_without_a_gpu(run, pytester):
    # a torch that sees no GPU, as on a CPU machine (the lint venv has no torch)
    pytester.makepyfile(
        torch="class cuda:\n    @staticmethod\n    def is_available():\n        return False\n"
    )
    result = run("def test_cuda_thing():\n    pass\n", "--timeout=30", "--cuda-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--cuda-only: torch sees no CUDA device*"])


def test_cuda_only_keeps_the_cuda_cases(run, pytester):
    pytester.makepyfile(
        torch="class cuda:\n    @staticmethod\n    def is_available():\n        return True\n"
    )
    result = run(
        """
        import pytest

        def test_on_cpu():
            pass

        @pytest.mark.parametrize("device", ["cpu", "cuda"])
        def test_device(device):
            pass

        @pytest.mark.skipif(False, reason="No cuda device detected")
        def test_guarded():
            pass
        """,
        "--timeout=30",
        "--cuda-only",
        "-v",
        # the test ids then start with this test's directory, "test_cuda_only_...": a directory
        # named after CUDA does not make its tests CUDA cases (as under nox's TMPDIR in .nox/)
        f"--rootdir={pytester.path.parent}",
    )
    result.assert_outcomes(passed=2, deselected=2)
    result.stdout.fnmatch_lines(["*test_device?cuda? PASSED*", "*test_guarded PASSED*"])
