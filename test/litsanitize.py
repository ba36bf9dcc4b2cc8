"""The lit test format of a build with sanitizers (test/lit.cfg.py)."""
import glob
import os
import shutil

import lit.formats
import lit.Test
import lit.TestRunner


class SanitizedShTest(lit.formats.ShTest):
    """ShTest for a build with sanitizers (MTC_SANITIZE; docs/testing.md,
    "Sanitised runs"). Each test's processes write their reports into
    Output/<test>.sanitizer/, and a test is failed when any report is there,
    whatever the exit status meant to the test: `not mtc ...` expects a
    failure, and an ended process is one. The reports are the test's output."""

    def __init__(self, execute_external, symbolizer):
        super().__init__(execute_external)
        self.symbolizer = symbolizer

    def execute(self, test, litConfig):
        _, tmp_base = lit.TestRunner.getTempPaths(test)
        report_dir = tmp_base + ".sanitizer"
        shutil.rmtree(report_dir, ignore_errors=True)
        os.makedirs(report_dir)
        symbolizer = self.symbolizer
        common = ["abort_on_error=1", "halt_on_error=1",
                  "external_symbolizer_path=" + symbolizer]
        env = test.config.environment
        env["ASAN_OPTIONS"] = ":".join(
            common + ["log_path=" + os.path.join(report_dir, "asan"),
                      "detect_leaks=1", "strict_string_checks=1",
                      "check_initialization_order=1",
                      "detect_stack_use_after_return=1"])
        env["UBSAN_OPTIONS"] = ":".join(
            common + ["log_path=" + os.path.join(report_dir, "ubsan"),
                      "print_stacktrace=1"])
        env["LSAN_OPTIONS"] = "log_path=" + os.path.join(report_dir, "lsan")
        result = super().execute(test, litConfig)
        reports = sorted(glob.glob(os.path.join(report_dir, "*")))
        if not reports:
            return result
        if not isinstance(result, lit.Test.Result):
            result = lit.Test.Result(*result)
        text = [result.output, "", "sanitizer reports (%s):" % report_dir]
        for path in reports:
            with open(path, errors="replace") as f:
                text += ["== " + os.path.basename(path), f.read()]
        return lit.Test.Result(lit.Test.FAIL, "\n".join(text))
